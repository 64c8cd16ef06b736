"""Result shaping on large real tool outputs: tokens delivered vs returned, answerability, time.

The corpus is made on every run, reproducibly, from real MCP servers and data:

* the npm filesystem server over this repository (``directory_tree`` of the source tree,
  ``read_text_file`` of the README, CHANGELOG and the pool's largest modules);
* the PyPI git server (``mcp-server-git``, in its own pinned venv under ``.cache/``) over this
  repository: ``git_log`` of 2,000 commits;
* ``@modelcontextprotocol/server-everything``: ``echo`` of the CHANGELOG (its largest response) and
  ``get-structured-content`` (structured content plus its text serialization);
* a 50,000-item JSON listing of the files under ``/usr/share`` and ``/usr/lib`` (sorted path,
  size, mode), and a 10 MB access log (seeded, 2026 timestamps).

Every output is shaped by :func:`toolscout_kit.shaping.shape_result` as the pool does. Each gets
three questions whose answer is a specific string at a known position (first, middle, last part).
A question is answerable when its answer string is in the preview or in what at most two
``read_result`` calls return, each chosen by a fixed rule from the question - no LLM:

1. text outputs: the question names a key term from line L; call 1 is a grep for that term with
   2 context lines; the answer is line L+1;
2. JSON listings: the question names an item's path; call 1 is a grep for it, call 2 the JMESPath
   projection ``items[?path=='<path>'].size`` (the answer is the size).

Over budget means delivered (preview or read output) past the budget, counted exactly.

    uv run --frozen python bench/result_shaping.py [--budget 4000] [--preview 1000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from toolscout.client import ContentBlock  # noqa: E402

from mcp_pool_svc.results import content_from_mcp  # noqa: E402
from mcp_pool_svc.session import open_connection  # noqa: E402
from tests.support.mcp_servers import everything_bin, filesystem_bin  # noqa: E402
from toolscout_kit.config import StdioServerConfig  # noqa: E402
from toolscout_kit.result_reading import grep, project  # noqa: E402
from toolscout_kit.shaping import ShapingPolicy, StructuredCopy, shape_result  # noqa: E402
from toolscout_kit.tokens import count_tokens  # noqa: E402

GIT_SERVER = "mcp-server-git==2026.10.19"
GIT_VENV = REPO / ".cache" / "bench-mcp-server-git"
RESULTS = REPO / "bench" / "results" / "result_shaping.json"
ENCODING = "o200k_base"


@dataclass
class Question:
    position: str  # first, middle, last
    key: str  # the term a grep looks for
    answer: str
    path: str = ""  # a JMESPath projection (JSON listings)


@dataclass
class Output:
    name: str
    content: tuple[ContentBlock, ...]
    structured_json: str = ""
    questions: list[Question] = field(default_factory=list)


# --- the corpus ---------------------------------------------------------------------------------


def _git_server_command() -> list[str]:
    exe = GIT_VENV / "bin" / "mcp-server-git"
    if not exe.exists():
        subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(GIT_VENV)], check=True)
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", str(GIT_VENV / "bin" / "python"), GIT_SERVER],
            check=True,
        )
    return [str(exe)]


async def _call_all(command: list[str], calls: list[tuple[str, str, dict[str, Any]]]) -> list[Output]:
    config = StdioServerConfig(command=command[0], args=command[1:], connect_timeout=120)
    outputs = []
    with tempfile.TemporaryDirectory() as workdir:
        async with open_connection(
            config,
            lambda *_: None,
            base_dir=Path(workdir),
            on_stderr=lambda _l: None,
            max_line_bytes=256 << 20,
        ) as conn:
            for label, tool, args in calls:
                raw = await conn.session.call_tool(tool, args)
                if raw.is_error:
                    raise RuntimeError(f"{label}: {tool} failed: {raw.content}")
                structured = raw.structured_content
                outputs.append(
                    Output(
                        label,
                        tuple(content_from_mcp(b) for b in raw.content),
                        json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
                        if structured
                        else "",
                    )
                )
    return outputs


def _listing(count: int) -> str:
    files: list[dict[str, Any]] = []
    for root in ("/usr/share", "/usr/lib"):
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                files.append({"path": path, "size": st.st_size, "mode": oct(st.st_mode & 0o777)})
    files.sort(key=lambda f: f["path"])
    if len(files) < count:
        raise RuntimeError(f"only {len(files)} files under /usr/share and /usr/lib; {count} needed")
    return json.dumps({"items": files[:count], "count": count}, indent=2)


def _log(target_bytes: int) -> str:
    rng = random.Random(2026)
    paths = ["/api/tools", "/api/search", "/api/call", "/mcp", "/healthz", "/metrics", "/api/chat"]
    lines, size, i = [], 0, 0
    while size < target_bytes:
        line = (
            f"2026-11-{1 + i // 400_000:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z "
            f"{rng.choice(['INFO', 'INFO', 'INFO', 'WARN', 'ERROR'])} req={i:08x} "
            f"user=u{rng.randint(1, 99999):05d} {rng.choice(['GET', 'POST'])} {rng.choice(paths)} "
            f"status={rng.choice([200, 200, 200, 201, 404, 500, 503])} ms={rng.randint(1, 4000)}"
        )
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


def _text_questions(text: str) -> list[Question]:
    """Three questions: the key term is a unique word of line L, the answer is line L+1."""
    lines = text.split("\n")
    questions = []
    for position, share in (("first", 0.02), ("middle", 0.5), ("last", 0.97)):
        start = int(len(lines) * share)
        for index in range(start, len(lines) - 1):
            answer = lines[index + 1].strip()
            words = sorted({w.strip("\"',.:;()[]{}") for w in lines[index].split()}, key=len, reverse=True)
            key = next((w for w in words if len(w) >= 6 and text.count(w) == 1), "")
            if key and len(answer) >= 4:
                questions.append(Question(position, key, answer[:120]))
                break
    return questions


def _listing_questions(text: str) -> list[Question]:
    items = json.loads(text)["items"]
    questions = []
    for position, share in (("first", 0.0), ("middle", 0.5), ("last", 0.999)):
        item = items[int(len(items) * share)]
        questions.append(
            Question(position, item["path"], str(item["size"]), path=f"items[?path=='{item['path']}'].size")
        )
    return questions


async def build_corpus() -> list[Output]:
    fs = str(filesystem_bin())
    exclude = [".venv", ".cache", ".git", "node_modules", "__pycache__", "results", "*.png", "fixtures"]
    outputs = await _call_all(
        [fs, str(REPO)],
        [
            (
                "filesystem directory_tree (repo)",
                "directory_tree",
                {"path": str(REPO), "excludePatterns": exclude},
            ),
            ("filesystem read README.md", "read_text_file", {"path": str(REPO / "README.md")}),
            ("filesystem read CHANGELOG.md", "read_text_file", {"path": str(REPO / "CHANGELOG.md")}),
            (
                "filesystem read supervisor.py",
                "read_text_file",
                {"path": str(REPO / "mcp_pool_svc" / "supervisor.py")},
            ),
            (
                "filesystem read types.py",
                "read_text_file",
                {"path": str(REPO / "clients" / "src" / "toolscout" / "client" / "types.py")},
            ),
        ],
    )
    outputs += await _call_all(
        _git_server_command(),
        [("git git_log (2,000 commits)", "git_log", {"repo_path": str(REPO), "max_count": 2000})],
    )
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    outputs += await _call_all(
        [str(everything_bin()), "stdio"],
        [
            ("everything echo (CHANGELOG)", "echo", {"message": changelog}),
            ("everything get-structured-content", "get-structured-content", {"location": "New York"}),
        ],
    )
    text_block = '{"type":"text"}'
    outputs.append(
        Output(
            "50,000-item JSON listing", (ContentBlock("text", text=_listing(50_000), raw_json=text_block),)
        )
    )
    outputs.append(
        Output("10 MB access log", (ContentBlock("text", text=_log(10_000_000), raw_json=text_block),))
    )
    for out in outputs:
        text = "\n".join(b.text for b in out.content if b.text) or out.structured_json
        out.questions = _listing_questions(text) if out.name.startswith("50,000") else _text_questions(text)
    return outputs


# --- measuring ----------------------------------------------------------------------------------


def _timed_shape(out: Output, policy: ShapingPolicy, reps: int) -> tuple[Any, list[float]]:
    times = []
    shaped = None
    for _ in range(reps):
        started = time.perf_counter()
        shaped = shape_result(out.content, out.structured_json, policy, handle="r-0-bench", what=out.name)
        times.append(time.perf_counter() - started)
    return shaped, times


def measure(outputs: list[Output], budget: int, preview: int) -> dict[str, Any]:
    policy = ShapingPolicy(budget, preview, ENCODING, StructuredCopy.STRUCTURED)
    shape_result((ContentBlock("text", text="warm up " * 9000),), "", policy, handle="w", what="w")
    rows: list[dict[str, Any]] = []
    for out in outputs:
        size = sum(len(b.text.encode()) + len(b.data) for b in out.content) + len(
            out.structured_json.encode()
        )
        reps = 21 if size < 1_000_000 else 3
        shaped, times = _timed_shape(out, policy, reps)
        delivered_text = "\n".join(b.text for b in shaped.content if b.text) + shaped.structured_content_json
        delivered = count_tokens(delivered_text, ENCODING)
        returned = count_tokens(
            "\n".join(b.text for b in out.content if b.text) + out.structured_json, ENCODING
        )
        over = delivered > budget
        answered = 0
        for q in out.questions:
            found = q.answer in delivered_text
            if not found and shaped.document is not None:
                read = grep(shaped.document, q.key, 2, budget, ENCODING)
                over = over or read.tokens > budget
                found = q.answer in read.text
                if not found and q.path:
                    read = project(shaped.document, q.path, budget, ENCODING)
                    over = over or read.tokens > budget
                    found = q.answer in read.text
            answered += found
        rows.append(
            {
                "output": out.name,
                "bytes": size,
                "tokens_returned": returned,
                "tokens_delivered": delivered,
                "handle": shaped.document is not None,
                "questions": len(out.questions),
                "answerable": answered,
                "over_budget": int(over),
                "shaping_ms_p50": round(statistics.median(times) * 1000, 3),
                "shaping_ms_per_mb": round(statistics.median(times) * 1000 / max(size / 1e6, 1e-9), 3),
            }
        )
        print(
            f"{out.name:38s} {size:>10,d} B {returned:>9,d} → {delivered:>5,d} tokens  "
            f"answerable {answered}/{len(out.questions)}  shaping p50 {rows[-1]['shaping_ms_p50']:.2f} ms",
            flush=True,
        )
    under_1mb = [r["shaping_ms_p50"] for r in rows if r["bytes"] < 1_000_000]
    total_returned = sum(r["tokens_returned"] for r in rows)
    total_delivered = sum(r["tokens_delivered"] for r in rows)
    return {
        "budget_tokens": budget,
        "preview_tokens": preview,
        "encoding": ENCODING,
        "outputs": rows,
        "tokens_returned": total_returned,
        "tokens_delivered": total_delivered,
        "tokens_saved_share": round(1 - total_delivered / total_returned, 4),
        "questions": sum(r["questions"] for r in rows),
        "answerable": sum(r["answerable"] for r in rows),
        "over_budget": sum(r["over_budget"] for r in rows),
        "shaping_ms_p50_under_1mb": round(statistics.median(under_1mb), 3) if under_1mb else None,
        "shaping_ms_per_mb_over_1mb": [r["shaping_ms_per_mb"] for r in rows if r["bytes"] >= 1_000_000],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=4000, help="result budget in tokens")
    parser.add_argument("--preview", type=int, default=1000, help="preview size in tokens")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    outputs = asyncio.run(build_corpus())
    summary = measure(outputs, args.budget, args.preview)
    share = summary["tokens_saved_share"]
    print(
        f"\ncorpus: {summary['tokens_returned']:,d} tokens returned → {summary['tokens_delivered']:,d} delivered "
        f"({share:.1%} fewer); answerable {summary['answerable']}/{summary['questions']}; "
        f"over budget {summary['over_budget']}; shaping p50 under 1 MB {summary['shaping_ms_p50_under_1mb']} ms"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "outputs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
