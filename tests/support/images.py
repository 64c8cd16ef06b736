"""Building and running deploy/Dockerfile in tests, without a container daemon or Docker Hub.

buildah (Debian's package) builds and runs with ``--storage-driver vfs --isolation chroot``, in a
storage folder of the test's own. The base image cannot come from Docker Hub here, so it is made
locally the way python:3.11-slim is laid out: Debian bookworm from Debian's archive (debootstrap)
with python3.11 and pip, ``/usr/local/bin/python3.11``, and this machine's CA bundle (so that pip and
uv inside the build trust what the machine trusts, a TLS-inspecting proxy included).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.mcp_servers import REPO_ROOT

__all__ = ["Buildah", "ensure_image_tools", "local_python_base"]

_DEBIAN_MIRROR = "http://deb.debian.org/debian"
_HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# What python:3.11-slim-bookworm sets, plus the CA bundle and pip's leave to install into the
# system Python (Debian marks it externally managed; the official image's own Python is not).
_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "PIP_BREAK_SYSTEM_PACKAGES": "1",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
}


def ensure_image_tools() -> None:
    """buildah and debootstrap from Debian's packages, installed when missing (as root).

    Raises:
        RuntimeError: they are missing and cannot be installed here.
    """
    if shutil.which("buildah") and shutil.which("debootstrap"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError("buildah and debootstrap are needed: apt-get install buildah debootstrap")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "buildah", "debootstrap"],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")


class Buildah:
    """``buildah`` on a storage folder of its own (vfs), so tests touch no shared image store."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {"BUILDAH_ROOT": str(root / "storage"), "BUILDAH_RUNROOT": str(root / "run")}
        self.argv = [
            "buildah",
            "--storage-driver",
            "vfs",
            "--root",
            self.env["BUILDAH_ROOT"],
            "--runroot",
            self.env["BUILDAH_RUNROOT"],
        ]

    def __call__(self, *args: str | Path, timeout: float = 600) -> str:
        """Runs one buildah command; returns its stdout.

        Raises:
            RuntimeError: it fails (with its output).
        """
        done = subprocess.run(
            [*self.argv, *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(map(str, args))} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def run_argv(
        self, container: str, argv: Sequence[str], *, user: str = "", env: Mapping[str, str] | None = None
    ) -> list[str]:
        """The command line that runs ``argv`` in ``container`` in a network namespace of its own
        (loopback only): a stack inside binds its fixed example ports there, not on this machine."""
        run = [
            *self.argv,
            "run",
            "--isolation",
            "chroot",
            *(["--user", user] if user else []),
            *(arg for name, value in (env or {}).items() for arg in ("--env", f"{name}={value}")),
            container,
            "--",
        ]
        inner = " ".join(_quote(a) for a in [*run, *argv])
        return ["unshare", "--net", "sh", "-c", f"ip link set lo up && exec {inner}"]

    def remove_storage(self) -> None:
        # vfs layers are plain folders (some read-only): buildah removes its own, then the rest goes.
        subprocess.run([*self.argv, "rm", "--all"], capture_output=True, timeout=300, check=False)
        subprocess.run([*self.argv, "rmi", "--all", "--force"], capture_output=True, timeout=300, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def local_python_base(
    buildah: Buildah, work: Path, name: str = "localhost/toolscout-test-python:3.11"
) -> str:
    """A python:3.11-slim-like base image built from Debian's archive; returns its name.

    Raises:
        RuntimeError: debootstrap or buildah fails.
    """
    rootfs = work / "rootfs"
    # The downloaded packages are kept (git-ignored .cache/), so a second run only unpacks them.
    packages = REPO_ROOT / ".cache" / "debootstrap"
    packages.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "debootstrap",
            f"--cache-dir={packages}",
            "--variant=minbase",
            "--include=python3.11,python3-pip,ca-certificates,passwd",
            "bookworm",
            str(rootfs),
            _DEBIAN_MIRROR,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"debootstrap failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    for link in ("python3.11", "python3", "python"):
        (rootfs / "usr/local/bin" / link).symlink_to("/usr/bin/python3.11")
    if _HOST_CA_BUNDLE.is_file():
        shutil.copyfile(_HOST_CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
    container = buildah("from", "scratch").strip()
    try:
        buildah("copy", container, rootfs, "/")
        env = [arg for key, value in _BASE_ENV.items() for arg in ("--env", f"{key}={value}")]
        buildah("config", *env, "--cmd", "python3", container)
        buildah("commit", "--quiet", container, name)
    finally:
        buildah("rm", container)
        shutil.rmtree(rootfs, ignore_errors=True)
    return name
