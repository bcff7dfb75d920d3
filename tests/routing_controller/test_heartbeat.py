"""The controller's probes: live while its loop keeps stepping, not once it hangs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from routing_controller import heartbeat


def probe(path, max_age):
    """Run the probe as the kubelet does: the module's command, judged by its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "routing_controller.heartbeat", f"--max-age-seconds={max_age}", f"--file={path}"],
        check=False,
        timeout=60,
    ).returncode


def test_the_probe_passes_after_a_step_and_fails_once_steps_stop(tmp_path):
    path = tmp_path / "heartbeat"
    assert probe(path, 60) == 1, "no step has ended yet"
    heartbeat.beat(path)
    assert probe(path, 60) == 0
    stale = time.time() - 120
    os.utime(path, (stale, stale))
    assert probe(path, 60) == 1


def test_a_slow_step_is_not_a_hung_loop():
    # Three periods plus one step in which every API call ran to its timeout: two pools, nine calls.
    assert heartbeat.calls_per_step(2) == 9
    assert heartbeat.max_age_seconds(10, pools=2) == 30 + 9 * heartbeat.API_TIMEOUT_S
