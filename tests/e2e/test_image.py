"""The image as deploy/build-image.sh builds it runs its own bundled example by default, with and
without the embeddings extra, on a locally built base (Docker Hub is out of reach here).

buildah (``--storage-driver vfs --isolation chroot``) builds it and runs the image's configured
command, as its configured user, in a network namespace of its own (see tests/support/images.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.support.images import Buildah, ensure_image_tools, local_python_base
from tests.support.mcp_servers import REPO_ROOT

# Making the base (debootstrap) and building the image take minutes on 2 shared cores, and they
# run in the first test's fixtures.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

VERSION = re.search(
    r'__version__ = "([^"]+)"', (REPO_ROOT / "clients/src/toolscout/client/_version.py").read_text()
).group(1)  # type: ignore[union-attr]
EXAMPLE_SERVERS = ("media", "notes", "text", "time", "weather")


@pytest.fixture(scope="module")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buildah]:
    ensure_image_tools()
    engine = Buildah(tmp_path_factory.mktemp("buildah"))
    try:
        yield engine
    finally:
        engine.remove_storage()


@pytest.fixture(scope="module")
def base(buildah: Buildah, tmp_path_factory: pytest.TempPathFactory) -> str:
    return local_python_base(buildah, tmp_path_factory.mktemp("base"))


def _build(buildah: Buildah, base: str, tag: str, *extra: str) -> str:
    done = subprocess.run(
        ["deploy/build-image.sh", "-t", tag, "--base", base, *extra],
        cwd=REPO_ROOT,
        env={**os.environ, **buildah.env},
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stderr


def _engine_here() -> str:
    """What the script picks on this machine: docker only with a daemon that answers."""
    docker = (
        subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False)
        if _has("docker")
        else None
    )
    if docker is not None and docker.returncode == 0:
        return "docker"
    return "podman" if _has("podman") else "buildah"


def _has(program: str) -> bool:
    return shutil.which(program) is not None


@pytest.fixture(scope="module")
def image(buildah: Buildah, base: str) -> str:
    if _engine_here() != "buildah":
        # This machine has a working docker or podman: the script would use it, not our buildah store.
        said = _build(buildah, base, "localhost/toolscout:test", "--engine", "buildah")
    else:
        said = _build(buildah, base, "localhost/toolscout:test")
    assert f"build-image.sh: building localhost/toolscout:test with buildah on {base}" in said
    return "localhost/toolscout:test"


@pytest.fixture(scope="module")
def image_with_embeddings(buildah: Buildah, base: str, image: str) -> str:
    said = _build(
        buildah, base, "localhost/toolscout:test-embeddings", "--engine", "buildah", "--extras", "embeddings"
    )
    assert "(extras: embeddings)" in said
    return "localhost/toolscout:test-embeddings"


def _default_command(buildah: Buildah, image: str) -> tuple[list[str], str]:
    config = json.loads(buildah("inspect", "--type", "image", image))["OCIv1"]["config"]
    return [*(config.get("Entrypoint") or []), *config["Cmd"]], config["User"]


def _run_default(buildah: Buildah, image: str, name: str) -> tuple[list[str], str]:
    """Runs the image's own command as its own user until the walkthrough is done; returns the
    lines it printed and the container's log file (INFO and up)."""
    argv, user = _default_command(buildah, image)
    container = buildah("from", "--name", name, image).strip()
    process = subprocess.Popen(
        buildah.run_argv(container, argv, user=user),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if "The stack keeps running" in line:
                done.set()
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        done.wait(timeout=300)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    # A `buildah run` right after the one just stopped can fail while buildah still releases the
    # container (seen once on a loaded machine: nothing read); it is tried again, bounded, and
    # what it said is kept for the assertion's message.
    for _attempt in range(5):
        read = subprocess.run(
            buildah.run_argv(container, ["sh", "-c", "cat /tmp/toolscout-up-*.log"]),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if read.returncode == 0 and read.stdout:
            break
        time.sleep(2)
    buildah("rm", container)
    log = read.stdout or f"(no log read: exit {read.returncode}, stderr {read.stderr!r})"
    return lines, log


def _run_to_end(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs ``argv`` in a session of its own; if it is still running after ``timeout`` seconds
    (a stack that was expected to refuse to start), the whole session is stopped, not only the
    first process, and the test fails with what it printed."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
        pytest.fail(f"still running after {timeout} s:\n{out[-2000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def _left_running() -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "/app/examples/servers/" in cmdline or "/app/.venv/bin/toolscout" in cmdline:
            found.append(cmdline)
    return found


def _assert_walkthrough_ran(lines: list[str]) -> None:
    text = "\n".join(lines)
    for server in EXAMPLE_SERVERS:
        assert any(line.split()[1:3] == [server, "ready"] for line in lines if line.strip()), text
    assert "Ready. In another terminal, from this directory:" in text
    assert "$ .venv/bin/toolscout -c /app/examples/casual_mcp_config.json servers" in text
    assert '"timezone": "UTC"' in text  # the walkthrough's tool call answered
    assert "The stack keeps running. Ctrl-C stops everything." in text
    assert "Traceback" not in text


def test_the_image_runs_its_bundled_example_by_default_with_the_search_it_can_serve(
    buildah: Buildah, image: str
) -> None:
    argv, user = _default_command(buildah, image)
    assert (argv, user) == (["/app/deploy/run-example.sh"], "10001:10001")
    lines, log = _run_default(buildah, image, "default-run")
    _assert_walkthrough_ran(lines)
    # No embeddings extra in this image: the example ran with BM25 instead of refusing to start.
    assert '"hybrid search configured"' not in log
    assert '"server started"' in log
    assert _left_running() == []


def test_hybrid_search_asked_of_an_image_without_the_extra_is_refused_before_anything_starts(
    buildah: Buildah, image: str
) -> None:
    # The example searches with BM25; asking this image (no embeddings extra) for hybrid search is
    # a configuration error found before any MCP server starts, naming the way out.
    container = buildah("from", "--name", "plain-up", image).strip()
    try:
        done = _run_to_end(
            buildah.run_argv(
                container,
                ["toolscout", "up", "-c", "/app/examples/casual_mcp_config.json"],
                user="10001",
                env={"TOOLSCOUT_SEARCH_MODE": "hybrid"},
            ),
            timeout=120,
        )
        version = subprocess.run(
            buildah.run_argv(container, ["toolscout", "--version"]),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        buildah("rm", container)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "toolscout.search.mode is 'hybrid' but the local embedder cannot be used" in done.stderr
    assert "TOOLSCOUT_SEARCH_MODE" in done.stderr
    assert "ready" not in done.stdout  # refused before any MCP server started
    assert version.stdout == f"toolscout {VERSION} (toolscout-client {VERSION})\n"


def test_an_image_built_with_the_embeddings_extra_serves_the_example_with_hybrid_search(
    buildah: Buildah, image_with_embeddings: str
) -> None:
    lines, log = _run_default(buildah, image_with_embeddings, "hybrid-run")
    _assert_walkthrough_ran(lines)
    assert '"hybrid search configured"' in log
    assert _left_running() == []
