"""``python -m orchestrator_svc --config PATH``."""

from __future__ import annotations

import sys

from orchestrator_svc.server import build_server
from toolscout_kit.entrypoint import run_service


def main() -> int:
    return run_service("orchestrator_svc", build_server)


if __name__ == "__main__":
    sys.exit(main())
