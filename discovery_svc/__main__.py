"""``python -m discovery_svc --config PATH``."""

from __future__ import annotations

import sys

from discovery_svc.server import build_server
from toolscout_kit.entrypoint import run_service

if __name__ == "__main__":
    sys.exit(run_service("discovery_svc", build_server))
