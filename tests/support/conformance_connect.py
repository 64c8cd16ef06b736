"""The MCP conformance suite's client: ``toolscout connect`` on the URL the suite appends.

``conformance client --command "python tests/support/conformance_connect.py"`` runs this per
scenario with the server URL last and, where the scenario has one, a client registered beforehand
in ``MCP_CONFORMANCE_CONTEXT`` (``client_id``, ``client_secret``). It connects, lists the tools and
calls ``test-tool``, headlessly (the suite's authorization servers approve without a person), with
a token file of its own so that scenarios never see each other's tokens.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from toolscout_cli.__main__ import main

CIMD_URL = "https://conformance-test.local/client-metadata.json"


def run(argv: list[str]) -> int:
    url = argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    # The suite's authorization servers take this URL as the client's metadata document (CIMD).
    args = ["connect", url, "--headless", "--call", "test-tool", "--client-metadata-url", CIMD_URL]
    if context.get("client_id"):
        args += ["--client-id", context["client_id"]]
    if context.get("client_secret"):
        args += ["--client-secret", context["client_secret"]]
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TOOLSCOUT_TOKEN_FILE"] = os.path.join(folder, "oauth-tokens.json")
        return main(args)


if __name__ == "__main__":
    sys.exit(run(sys.argv))
