"""The controller's liveness: the loop touches a file after every step; a probe checks its age.

The controller serves no HTTP, so its probes exec `python -m routing_controller.heartbeat`: exit 0
while the last step ended less than `--max-age-seconds` ago, 1 otherwise (a loop stuck in a call
that never returns, which Kubernetes then restarts).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Final

# On the pod's writable /tmp (an emptyDir under a read-only root).
HEARTBEAT_FILE = Path("/tmp/routing-controller.heartbeat")  # noqa: S108 - inside the container


# Every Kubernetes API call of the loop gives up after this (cluster.py, loop.py): a slow API makes a
# slow step, never a hung one.
API_TIMEOUT_S: Final = 15


def calls_per_step(pools: int) -> int:
    """The API calls of one step, made one after another: a Deployment, its Pods and the NodeClaims per
    pool, then the Ingress read, its patch and an Event."""
    return 3 * pools + 3


def max_age_seconds(period_s: float, pools: int) -> float:
    """How old the heartbeat may get before the loop counts as hung: three periods plus one step whose
    every call ran to its timeout."""
    return 3 * period_s + calls_per_step(pools) * API_TIMEOUT_S


def beat(path: Path = HEARTBEAT_FILE) -> None:
    """Record that a step has just ended."""
    path.touch()


def is_fresh(max_age_s: float, path: Path = HEARTBEAT_FILE, now: float | None = None) -> bool:
    """True when a step ended within `max_age_s` seconds (False before the first one)."""
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    return age <= max_age_s


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the heartbeat is fresh, 1 when it is stale or missing."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-age-seconds", type=float, required=True)
    parser.add_argument("--file", type=Path, default=HEARTBEAT_FILE)
    args = parser.parse_args(argv)
    return 0 if is_fresh(args.max_age_seconds, args.file) else 1


if __name__ == "__main__":
    sys.exit(main())
