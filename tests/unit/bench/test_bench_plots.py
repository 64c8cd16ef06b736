"""bench/plots.py draws each plot from saved results: a PNG of the fixed pixel size, not empty."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.support.bench_scripts import load_bench_script
from tests.support.mcp_servers import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "bench"


plots = load_bench_script("plots")


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.parametrize("name", sorted(plots.PLOTS))
def test_each_plot_renders_from_a_saved_result_as_a_png_of_the_fixed_size(name: str, tmp_path: Path) -> None:
    source, plot = plots.PLOTS[name]
    path = plot(json.loads((FIXTURES / source).read_text()), tmp_path / name)
    assert _png_size(path) == (plots.WIDTH, plots.HEIGHT)
    assert path.stat().st_size > 20_000  # axes, bars or lines, labels: far more than a blank canvas


def test_render_all_writes_every_plot_and_skips_missing_inputs(tmp_path: Path) -> None:
    written = plots.render_all(FIXTURES, tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(plots.PLOTS)
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "retrieval.json").write_text((FIXTURES / "retrieval.json").read_text())
    assert [p.name for p in plots.render_all(tmp_path / "partial", tmp_path / "out2")] == [
        "retrieval_recall.png"
    ]


def test_a_series_added_to_the_retrieval_results_is_drawn_too() -> None:
    results = json.loads((FIXTURES / "retrieval.json").read_text())["results"]
    assert plots.engines_in(results) == ["toolscout", "hybrid", "casual-mcp", "fastmcp"]
    results["bfcl"]["dense-only"] = results["bfcl"]["toolscout"]
    assert plots.engines_in(results)[-1] == "dense-only"


def test_the_deferral_cost_plot_keys_its_line_styles_in_a_legend_not_in_the_axis_label() -> None:
    data = json.loads((FIXTURES / "deferral.json").read_text())
    first = next(iter(data["modes"].values()))
    data["modes"]["responses_native"] = {**first, "label": "Responses native", "api": "responses"}
    data["modes"]["append_chat"] = {**first, "label": "append", "api": "chat_completions"}
    fig, ax = plots.deferral_cost_axes(data)
    try:
        assert ax.get_ylabel() == "input cost in full-price tokens (log)"
        legends = [child for child in ax.get_children() if type(child).__name__ == "Legend"]
        keys = {
            legend.get_title().get_text(): [t.get_text() for t in legend.get_texts()] for legend in legends
        }
        assert keys["line style: API"] == ["Anthropic Messages", "OpenAI Chat Completions / OpenAI Responses"]
        style_key = next(legend for legend in legends if legend.get_title().get_text() == "line style: API")
        assert [line.get_linestyle() for line in style_key.get_lines()] == ["-", "--"]
        modes = keys["mode (API): total"]
        assert len(modes) == len(data["modes"])
    finally:
        plots.plt.close(fig)
