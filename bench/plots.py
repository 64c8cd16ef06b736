"""PNG plots of the saved benchmark results (``make bench`` draws them after the runs).

    uv run --frozen python bench/plots.py [--results bench/results] [--out bench/results]

Reads the JSON files the benchmark scripts save and writes, next to them:
  * retrieval_recall.png       Recall@5 per data set, every engine in retrieval.json
  * retrieval_sizes.png        Recall@5 and false-load rate against catalog size (retrieval_sweep.json)
  * search_latency.png         search p50/p99 against catalog size, log-log: BM25, BM25 in a toolset,
                               hybrid, casual-mcp
  * tokens_per_call.png        tool-definition tokens of each LLM call of the scripted
                               livemcpbench conversation, per mode (orchestrator.json)
  * pool_latency_cdf.png       CallTool latency CDF: direct SDK, through the pool, over gRPC
  * gateway_tokens.png         tool-definition tokens an MCP host's model sees on its first call:
                               every server directly vs the gateway (meta, progressive) vs
                               FastMCP 4's search transform, log scale (gateway.json)
A plot whose input file is missing (or predates the figures it needs) is skipped with a note.
Matplotlib runs headless (Agg); every figure is WIDTH x HEIGHT pixels.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only (ruff allows statements like this before imports)

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, NullFormatter

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DPI = 100
WIDTH, HEIGHT = 1000, 560  # pixels of every plot

# Known series get fixed names and colours so that plots read the same from run to run; any
# other series in a file (a new engine, a new mode) is drawn too, in the next free colour.
_NAMES = {
    "toolscout": "toolscout (BM25)",
    "hybrid": "toolscout hybrid",
    "toolscout-mask": "toolscout (BM25) in a toolset of half the catalog",
    "casual-mcp": "casual-mcp 1.0",
    "fastmcp": "FastMCP 4 (BM25)",
    "without_discovery": "without discovery (every definition, every call)",
    "with_discovery": "with discovery (search_tools + found tools)",
    "direct_sdk": "direct (MCP SDK session)",
    "pool_in_process": "through the pool (in process)",
    "pool_via_grpc": "CallTool over gRPC (pool in its own process)",
    "direct": "every server connected directly",
    "meta": "toolscout gateway, meta",
    "progressive": "toolscout gateway, progressive",
}
_COLORS = {
    "toolscout": "#1f6fb4",
    "hybrid": "#7b3fb0",
    "toolscout-mask": "#17becf",
    "casual-mcp": "#d9822b",
    "fastmcp": "#5a9e4b",
    "without_discovery": "#c0392b",
    "with_discovery": "#1f6fb4",
    "direct_sdk": "#7f7f7f",
    "pool_in_process": "#1f6fb4",
    "pool_via_grpc": "#d9822b",
    "direct": "#c0392b",
    "meta": "#1f6fb4",
    "progressive": "#7b3fb0",
    # deferral_bench.py modes: one hue per mode, the line style tells the API.
    "no_discovery_chat": "#c0392b",
    "no_discovery_anthropic": "#c0392b",
    "append_chat": "#1f6fb4",
    "append_anthropic": "#1f6fb4",
    "anthropic_native": "#2ca02c",
    "responses_native": "#7b3fb0",
    "casual_chat": "#d9822b",
    "casual_anthropic": "#d9822b",
}
# Chat Completions / Responses dashed, Anthropic Messages solid.
_API_STYLE = {"messages": "-", "chat_completions": "--", "responses": "--"}
_API_NAMES = {
    "messages": "Anthropic Messages",
    "chat_completions": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
}
_SPARE_COLORS = ["#17becf", "#bcbd22", "#e377c2", "#8c564b", "#9467bd"]
_DATASET_ORDER = ["bfcl", "toolbench", "sealtools", "metatool", "restbench"]
# Tick marks for a log axis that spans less than a decade (matplotlib would label none).
_NICE_TICKS = [
    0.1,
    0.2,
    0.3,
    0.5,
    0.7,
    1,
    1.5,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    10,
    15,
    20,
    30,
    50,
    70,
    100,
    200,
    500,
    1000,
]


def _name(key: str) -> str:
    return _NAMES.get(key, key)


def _colors(keys: Sequence[str]) -> dict[str, str]:
    spare = iter(_SPARE_COLORS * (len(keys) // len(_SPARE_COLORS) + 1))
    return {k: _COLORS.get(k) or next(spare) for k in keys}


def _load_note(load: Any) -> str:
    # Wall-clock figures from a busy machine are slower; the plot says how busy it was.
    return (
        f"   [machine load average {load:g} at the end of the run]" if isinstance(load, int | float) else ""
    )


def _figure() -> tuple[Any, Axes]:
    fig, ax = plt.subplots(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
    ax.grid(True, alpha=0.3)
    ax.set_axisbelow(True)
    return fig, ax


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    # No bbox_inches="tight": that would change the pixel size with the labels.
    fig.savefig(path, dpi=DPI, format="png")
    plt.close(fig)
    return path


def engines_in(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for per_engine in results.values():
        seen.update(dict.fromkeys(per_engine))
    known = [k for k in ("toolscout", "hybrid", "casual-mcp", "fastmcp") if k in seen]
    return known + [k for k in seen if k not in known]


def plot_retrieval(data: Mapping[str, Any], path: Path, metric: str = "R@5") -> Path:
    """Grouped bars: ``metric`` per data set, one bar per engine present in the file."""
    results: Mapping[str, Mapping[str, Any]] = data["results"]
    sets = [s for s in _DATASET_ORDER if s in results] + sorted(s for s in results if s not in _DATASET_ORDER)
    engines = engines_in(results)
    colors = _colors(engines)
    fig, ax = _figure()
    width = 0.8 / max(len(engines), 1)
    for i, engine in enumerate(engines):
        xs = [j + (i - (len(engines) - 1) / 2) * width for j in range(len(sets))]
        values = [results[s].get(engine, {}).get(metric) for s in sets]
        present = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        bars = ax.bar(
            [x for x, _ in present], [v for _, v in present], width, label=_name(engine), color=colors[engine]
        )
        ax.bar_label(bars, labels=[f"{v:.2f}" for _, v in present], fontsize=7, padding=2)
    ax.set_xticks(range(len(sets)), [f"{s}\n{_queries(results[s])} queries" for s in sets])
    ax.set_ylim(0, 1.08)
    label = {"R@5": "Recall@5"}.get(metric, metric)
    ax.set_ylabel(label)
    ax.set_title(f"Search quality: {label} per data set (higher is better)")
    ax.legend(loc="upper right", fontsize=8, ncols=len(engines))
    return _save(fig, path)


def _queries(per_engine: Mapping[str, Any]) -> str:
    counts = {m.get("n") for m in per_engine.values() if isinstance(m, Mapping)}
    counts.discard(None)
    return f"{counts.pop():,}" if len(counts) == 1 else "?"


# search_latency.json series: (engine, its variant) -> plot series key.
_LATENCY_SERIES = {
    ("toolscout", "query"): "toolscout",
    ("toolscout", "query_half_catalog_mask"): "toolscout-mask",
    ("toolscout-hybrid", "query"): "hybrid",
    ("casual-mcp", "query"): "casual-mcp",
}


def plot_search_latency(data: Mapping[str, Any], path: Path) -> Path:
    """Log-log: query latency p50 (solid) and p99 (dashed) against catalog size, per engine: BM25,
    BM25 inside a toolset (half the catalog), hybrid (query embedding included), casual-mcp."""
    sizes = sorted(data["sizes"], key=int)
    series = [
        (key, engine, variant)
        for (engine, variant), key in _LATENCY_SERIES.items()
        if any(variant in data["sizes"][s].get(engine, {}) for s in sizes)
    ]
    colors = _colors([key for key, _, _ in series])
    fig, ax = _figure()
    for key, engine, variant in series:
        points = [
            (int(s), data["sizes"][s][engine][variant])
            for s in sizes
            if variant in data["sizes"][s].get(engine, {})
        ]
        xs = [x for x, _ in points]
        for quantile, style in (("p50", "-"), ("p99", "--")):
            ax.plot(
                xs,
                [q[f"{quantile}_ms"] for _, q in points],
                style,
                marker="o",
                color=colors[key],
                label=f"{_name(key)} {quantile}",
            )
    # On a shared machine the wall-clock tail mostly measures other processes; CPU time shows what
    # the search itself costs (BM25: the searching thread's; hybrid: the process's, model included).
    for engine, key in (("toolscout", "toolscout"), ("toolscout-hybrid", "hybrid")):
        cpu = [
            (int(s), data["sizes"][s][engine].get("query_cpu")) for s in sizes if engine in data["sizes"][s]
        ]
        if cpu and all(q for _, q in cpu):
            ax.plot(
                [x for x, _ in cpu],
                [q["p99_ms"] for _, q in cpu],
                ":",
                marker=".",
                color=colors.get(key, _COLORS[key]),
                label=f"{_name(key)} p99, CPU time",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([int(s) for s in sizes], [f"{int(s):,}" for s in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"tools in the catalog{_load_note(data.get('load_average_1m_at_end'))}")
    ax.set_ylabel("search latency per query (ms)")
    ax.set_title("search_tools latency in process against catalog size (log-log, lower is better)")
    ax.legend(fontsize=7, ncols=2)
    return _save(fig, path)


# retrieval_sweep.json engines -> plot series keys.
_SWEEP_ENGINES = {
    "toolscout-bm25": "toolscout",
    "toolscout-hybrid": "hybrid",
    "casual-mcp": "casual-mcp",
    "fastmcp": "fastmcp",
}


def plot_retrieval_sizes(data: Mapping[str, Any], path: Path) -> Path:
    """Two panels against catalog size (log): Recall@5 of queries whose tools are in the catalog
    (25, 100, 300 tools of each set, then the whole set), and the false-load rate of the same
    queries with their tools removed (share of searches that load a tool anyway). One line per
    engine and data set: colour = engine, line style = data set."""
    from matplotlib.lines import Line2D

    results: Mapping[str, Mapping[str, Any]] = data["results"]
    sets = [s for s in _DATASET_ORDER if s in results] + sorted(s for s in results if s not in _DATASET_ORDER)
    styles = dict(zip(sets, ["-", "--", ":", "-.", (0, (3, 1, 1, 1, 1, 1))] * 2, strict=False))
    engines = [e for e in _SWEEP_ENGINES if any(e in row for v in results.values() for row in v.values())]
    colors = _colors([_SWEEP_ENGINES[e] for e in engines])
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
    panels = (("R@5", "", "Recall@5, tools in the catalog (higher is better)", (0.3, 1.01)),
              ("false_load_rate", "-negative", "false-load rate, tools removed (lower is better)", (0.75, 1.01)))  # fmt: skip
    for ax, (metric, suffix, title, ylim) in zip(axes, panels, strict=True):
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
        for engine in engines:
            for name in sets:
                variants = results[name]
                points = sorted(
                    (int(row["tools"]), row[engine][metric])
                    for label, row in variants.items()
                    if label.endswith(suffix)
                    and (suffix or not label.endswith("-negative"))
                    and engine in row
                )
                ax.plot(
                    [x for x, _ in points],
                    [y for _, y in points],
                    linestyle=styles[name],
                    marker="o",
                    markersize=3,
                    color=colors[_SWEEP_ENGINES[engine]],
                    alpha=0.8,
                    lw=1.3,
                )
        ax.set_xscale("log")
        ticks = [25, 100, 300, 1000, 4000]
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(*ylim)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(
            f"tools in the catalog (log){_load_note(data.get('load_average_1m_at_end'))}", fontsize=8
        )
    handles = [
        Line2D([], [], color=colors[_SWEEP_ENGINES[e]], lw=2, label=_name(_SWEEP_ENGINES[e])) for e in engines
    ]
    handles += [Line2D([], [], color="#555555", linestyle=styles[s], label=s) for s in sets]
    axes[0].legend(handles=handles, fontsize=7, loc="lower left", ncols=2)
    fig.suptitle(
        "Search on catalogs of every size: each query in its own catalog of its tools + random others",
        fontsize=10,
    )
    return _save(fig, path)


def plot_tokens_per_call(data: Mapping[str, Any], path: Path) -> Path:
    """Tool-definition tokens of each LLM call of the scripted conversation, one line per mode."""
    tokens: Mapping[str, Any] = data["tokens"]
    modes = [
        m for m, v in tokens.items() if isinstance(v, Mapping) and "tool_definition_tokens_per_call" in v
    ]
    colors = _colors(modes)
    fig, ax = _figure()
    for mode in modes:
        per_call = tokens[mode]["tool_definition_tokens_per_call"]
        calls = range(1, len(per_call) + 1)
        total = f"{sum(per_call):,} in {len(per_call)} calls"
        ax.step(calls, per_call, where="mid", color=colors[mode], alpha=0.35)
        ax.plot(calls, per_call, "o", color=colors[mode], label=f"{_name(mode)}: {total}")
        for x, y in zip(calls, per_call, strict=True):
            ax.annotate(f"{y:,}", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    lowest = min((min(tokens[m]["tool_definition_tokens_per_call"], default=1) for m in modes), default=1)
    ax.set_ylim(bottom=10 ** math.floor(math.log10(max(lowest, 1))))
    longest = max((len(tokens[m]["tool_definition_tokens_per_call"]) for m in modes), default=1)
    ax.set_xticks(range(1, longest + 1))
    ax.set_xlabel("LLM call of the conversation")
    ax.set_ylabel("tool-definition tokens sent (log)")
    catalog = tokens.get("catalog_tools", "?")
    ax.set_title(
        f"Tool-definition tokens per LLM call: scripted 3-task chat over livemcpbench ({catalog} tools)"
    )
    ax.legend(fontsize=8, loc="center right")
    return _save(fig, path)


def plot_pool_cdf(data: Mapping[str, Any], path: Path) -> Path:
    """CDF of CallTool latency from the saved percentiles of each way of calling the tool.

    Raises:
        KeyError: the file has no ``cdf_ms`` (saved by bench/pool_latency.py since the plots).
    """
    cdf: Mapping[str, Sequence[float]] = data["cdf_ms"]
    series = list(cdf)
    colors = _colors(series)
    fig, ax = _figure()
    for key in series:
        values = list(cdf[key])
        fractions = [i / (len(values) - 1) for i in range(len(values))]
        median = values[len(values) // 2]
        ax.plot(values, fractions, color=colors[key], label=f"{_name(key)}: p50 {median:.2f} ms")
    # Dotted: this process's CPU time per call, which the machine's other load does not inflate.
    cpu = {key: [max(v, 0.001) for v in values] for key, values in data.get("cpu_cdf_ms", {}).items()}
    for key, values in cpu.items():
        fractions = [i / (len(values) - 1) for i in range(len(values))]
        median = values[len(values) // 2]
        label = f"{_name(key)}, CPU in the calling process: p50 {median:.2f} ms"
        ax.plot(values, fractions, ":", color=colors.get(key, "0.3"), label=label)
    ax.set_xscale("log")
    low = min(min(v) for v in [*cdf.values(), *cpu.values()])
    high = max(max(v) for v in [*cdf.values(), *cpu.values()])
    ax.set_xticks([t for t in _NICE_TICKS if low <= t <= high] or [low, high])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1)
    ax.set_xlabel(
        f"latency of one tool call (ms, log){_load_note(data.get('machine', {}).get('load_average_1m_at_end'))}"
    )
    ax.set_ylabel("fraction of calls at most this slow")
    calls = data.get("calls", "?")
    ax.set_title(
        f"CallTool latency CDF: {calls} calls of a stdio tool, direct vs through the pool (dotted: CPU)"
    )
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def deferral_cost_axes(data: Mapping[str, Any]) -> tuple[Any, Axes]:
    """The figure of :func:`plot_deferral_cost`, before it is saved (tests read its legends)."""
    modes: Mapping[str, Any] = data["modes"]
    keys = list(modes)
    colors = _colors(keys)
    fig, ax = _figure()
    for key in keys:
        row = modes[key]
        per_call = row["cache_weighted_per_call"]
        same = ", tools identical" if row.get("tools_byte_identical") else ""
        label = f"{row['label']} ({row['api']}): {row['cache_weighted_input_cost']:,.0f}{same}"
        style = _API_STYLE.get(row["api"], "-")
        ax.plot(
            range(1, len(per_call) + 1),
            per_call,
            style,
            marker="o",
            color=colors[key],
            label=label,
            alpha=0.85,
        )
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    longest = max((len(modes[k]["cache_weighted_per_call"]) for k in keys), default=1)
    ax.set_xticks(range(1, longest + 1))
    ax.set_xlabel("LLM call of the conversation")
    ax.set_ylabel("input cost in full-price tokens (log)")
    tools = data.get("catalog", {}).get("tools", "?")
    ax.set_title(
        f"Cache-weighted input cost per LLM call by deferral mode: 3-task chat over livemcpbench ({tools} tools)"
    )
    modes_legend = ax.legend(fontsize=7, loc="upper right", title="mode (API): total", title_fontsize=7)
    # The line style says which provider API a mode runs on: a key of its own, not in the axis label.
    apis = sorted({modes[k]["api"] for k in keys}, key=lambda api: (_API_STYLE.get(api, "-"), api))
    styles: dict[str, list[str]] = {}
    for api in apis:
        styles.setdefault(_API_STYLE.get(api, "-"), []).append(_API_NAMES.get(api, api))
    # Empty lines drawn after the modes' legend was made: only this key shows them.
    handles = [ax.plot([], [], style, color="0.3")[0] for style in styles]
    ax.legend(
        handles,
        [" / ".join(names) for names in styles.values()],
        fontsize=7,
        loc="lower left",
        title="line style: API",
        title_fontsize=7,
    )
    ax.add_artist(modes_legend)
    return fig, ax


def plot_deferral_cost(data: Mapping[str, Any], path: Path) -> Path:
    """Cache-weighted input cost of each LLM call of the scripted conversation, one line per
    deferral mode (bench/deferral_bench.py): where a changed tool list costs a cache rewrite."""
    fig, _ = deferral_cost_axes(data)
    return _save(fig, path)


def plot_gateway_tokens(data: Mapping[str, Any], path: Path) -> Path:
    """First-call tool-definition tokens per way of connecting, for each catalog (grouped bars, log)."""
    catalogs = [("livemcpbench", data["tokens_livemcpbench"]), ("fleet", data["tokens_fleet"])]
    series = [k for k in ("direct", "meta", "progressive", "fastmcp") if any(k in c for _, c in catalogs)]
    colors = _colors(series)
    fig, ax = _figure()
    width = 0.8 / len(series)
    for i, key in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(catalogs))]
        ys = [c.get(key, 0) for _, c in catalogs]
        bars = ax.bar(xs, ys, width, color=colors[key], label=_name(key))
        for bar, y in zip(bars, ys, strict=True):
            if y:
                ax.annotate(
                    f"{y:,}",
                    (bar.get_x() + bar.get_width() / 2, y),
                    textcoords="offset points",
                    xytext=(0, 3),
                    ha="center",
                    fontsize=8,
                )
    ax.set_xticks(range(len(catalogs)))
    ax.set_xticklabels([f"{name} ({c['tools']:,} tools, {c['servers']:,} servers)" for name, c in catalogs])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("tool-definition tokens on the first call (o200k, log)")
    note = _load_note(data.get("run", {}).get("load_average"))
    ax.set_title(f"What an MCP host's model is sent before its first search{note}", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


PLOTS: dict[str, tuple[str, Callable[[Mapping[str, Any], Path], Path]]] = {
    "retrieval_recall.png": ("retrieval.json", plot_retrieval),
    "retrieval_sizes.png": ("retrieval_sweep.json", plot_retrieval_sizes),
    "search_latency.png": ("search_latency.json", plot_search_latency),
    "tokens_per_call.png": ("orchestrator.json", plot_tokens_per_call),
    "pool_latency_cdf.png": ("pool_latency.json", plot_pool_cdf),
    "deferral_cost.png": ("deferral.json", plot_deferral_cost),
    "gateway_tokens.png": ("gateway.json", plot_gateway_tokens),
}


def render_all(results: Path, out: Path) -> list[Path]:
    """Every plot whose input is in ``results``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (source, plot) in PLOTS.items():
        source_path = results / source
        if not source_path.is_file():
            print(f"skipped {name}: no {source_path}", file=sys.stderr)
            continue
        try:
            written.append(plot(json.loads(source_path.read_text(encoding="utf-8")), out / name))
        except KeyError as err:
            print(f"skipped {name}: {source_path} has no {err} (re-run its benchmark)", file=sys.stderr)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the benchmark JSON files")
    parser.add_argument("--out", type=Path, help="folder for the PNG files (default: --results)")
    args = parser.parse_args()
    for path in render_all(args.results, args.out or args.results):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
