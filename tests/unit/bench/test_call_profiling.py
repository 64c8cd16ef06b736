"""The call-path profilers' own logic: bench/gateway_call_profile.py's owner of a py-spy sample and
bench/call_timeline.py's segments from the services' marks."""

from __future__ import annotations

from pathlib import Path

from tests.support.bench_scripts import load_bench_script

profile = load_bench_script("gateway_call_profile")
timeline = load_bench_script("call_timeline")

# The frames py-spy --native records above a service's event loop (uvloop).
_ENTRY = ";".join(
    [
        "_run_module_as_main (<frozen runpy>:198)",
        "main (toolscout_cli/__main__.py:475)",
        "run_serve (toolscout_cli/stack.py:563)",
        "run (toolscout_kit/event_loop.py:68)",
        "Runner.run (asyncio/runners.py:118)",
        "run_until_complete (loop.c:35410)",
        "uv_run (core.c:452)",
    ]
)


def _stack(*frames: str) -> str:
    return ";".join([_ENTRY, *frames])


def test_a_thread_waiting_is_no_owners_sample() -> None:
    assert profile.owner_of(_stack("uv__io_poll (epoll.c:236)", "epoll_pwait (epoll_pwait.c:40)")) is None
    poller = (
        "_bootstrap (threading.py:995);0x7f5e788e7b92 (grpc/_cython/cygrpc.cpython-311-x86_64-linux-gnu.so)"
    )
    assert profile.owner_of(f"{poller};epoll_wait (epoll_wait.c:30)") is None
    assert profile.owner_of(f"{poller};__futex_abstimed_wait_common (futex-internal.c:57)") is None
    # A thread pool's worker waiting for work: libc's frames below the wait are bare addresses.
    worker = ";".join(
        [
            "Thread.run (threading.py:982)",
            "_worker (concurrent/futures/thread.py:81)",
            "_queue_SimpleQueue_get_impl (_queuemodule.c:253)",
            "PyThread_acquire_lock_timed (libpython3.11.so.1.0)",
            "0x7f00ac2aed90 (libc.so.6)",
            "0x7f00ac2a3f16 (libc.so.6)",
        ]
    )
    assert profile.owner_of(worker) is None
    # Busy in a library whose frames have no names: not a wait.
    assert (
        profile.owner_of(_stack("McpPool.call (mcp_pool_svc/pool.py:300)", "0x7f28 (pydantic_core/x.so)"))
        is not None
    )


def test_the_loops_own_work_is_not_the_entry_points() -> None:
    """The frames that started the loop name no owner of the work: uvloop's own code is "other"."""
    sample = _stack("Loop__on_idle (loop.c:19387)", "Handle__run (loop.c:70935)")
    assert profile.owner_of(sample) == profile.OTHER


def test_native_and_cython_frames_go_to_their_library() -> None:
    grpc = next(name for name, _ in profile.OWNERS if name.startswith("grpc"))
    sample = _stack(
        "CallStreams._run (mcp_pool_svc/servicer.py:240)",
        "_Stream.answer (mcp_pool_svc/servicer.py:140)",
        "0x7f5a194f66a2 (grpc/_cython/cygrpc.cpython-311-x86_64-linux-gnu.so)",
        "sendmsg (sendmsg.c:28)",
    )
    assert profile.owner_of(sample) == grpc


def test_the_pools_frames_have_owners_of_their_own() -> None:
    post = profile.owner_of(
        _stack("McpPool.call (mcp_pool_svc/pool.py:300)", "LeanPost._post_direct (mcp_pool_svc/lean.py:200)")
    )
    path = profile.owner_of(
        _stack("CallStreams._run (mcp_pool_svc/servicer.py:240)", "McpPool.call (mcp_pool_svc/pool.py:300)")
    )
    assert post is not None
    assert "POST" in post
    assert path is not None
    assert "call path" in path
    assert profile.owner_of(_stack("GatewayFront._lean_call (mcp_gateway_svc/front.py:610)")) == (
        "the front and the lean path (admission, body, replies)"
    )


def test_segments_follow_the_calls_order_and_a_late_write_completion_counts(tmp_path: Path) -> None:
    """Marks in the order the services wrote them; the pool's write completion (Pb) of each call
    comes after the client has its answer (C1), before the next call starts."""
    marks = tmp_path / "marks.txt"
    lines = ["C0 0", "START 1"]  # a warm-up call's mark before START is not counted
    for n, base in enumerate((1_000_000, 50_000_000)):
        step = 1_000_000 * (n + 1)  # the second call's segments twice as long
        for i, mark in enumerate(timeline.ORDER):
            lines.append(f"{mark} {base + i * step}")
            if mark == "Gw":
                lines.append(f"Gx {base + i * step + step // 2}")
            if mark == "Pa":
                pa = base + i * step
        lines.append(f"Pb {pa + 20 * step}")  # after C1
    marks.write_text("\n".join(lines) + "\n")
    segments, counted = timeline._segments(marks)
    assert counted == 2
    assert list(segments)[: len(timeline.ORDER) - 1] == list(
        zip(timeline.ORDER, timeline.ORDER[1:], strict=False)
    )
    assert segments[("C0", "G1")] == 1.5  # the median of 1 and 2 ms
    assert segments[("Gw", "Gx")] == 0.75
    assert segments[("Pa", "Pb")] == 30.0


def test_each_hot_cold_piece_runs_on_the_current_code() -> None:
    """bench/hot_cold.py's pieces call the client library, mcp_types and json as they are now: a
    renamed function or a changed value type fails here, not in the middle of a bench run."""
    hot_cold = load_bench_script("hot_cold")
    pieces = hot_cold.pieces()
    assert len(pieces) == 7
    for name, piece in pieces.items():
        assert piece() is not None, name
