"""A full disk does not burn an Idempotency-Key: `python -m app` with JOBS_DIR/records on a tiny tmpfs
(Debian's bubblewrap), filled and freed while it runs. The submission gets a readable 507, a retry
with the same key gets 507 again (not 409), and once space returns the same key makes the job."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.app_process import run_app

RECORDS_TMPFS_BYTES = 256 * 1024
# Runs the service in the background and fills or frees the records' tmpfs when the test asks (a
# file appears in $CTL), since only a process inside the sandbox sees that mount.
CONTROL_LOOP = """
"$@" &
app=$!
trap 'kill -TERM $app' TERM
while kill -0 $app 2>/dev/null; do
  if [ -e "$CTL/fill" ]; then rm -f "$CTL/fill"; cat /dev/zero > "$RECORDS/.filler" 2>/dev/null; touch "$CTL/filled"; fi
  if [ -e "$CTL/free" ]; then rm -f "$CTL/free"; rm -f "$RECORDS/.filler"; touch "$CTL/freed"; fi
  sleep 0.05
done
wait $app
"""


def bwrap_tmpfs_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--dev-bind", "/", "/", "--size", "65536", "--tmpfs", "/tmp", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(
    not bwrap_tmpfs_works(), reason="needs bubblewrap able to mount a tmpfs (apt install bubblewrap)"
)


def ask(ctl: Path, action: str, done: str) -> None:
    (ctl / done).unlink(missing_ok=True)
    (ctl / action).touch()
    deadline = time.monotonic() + 30
    while not (ctl / done).exists():
        assert time.monotonic() < deadline, f"the sandbox never did {action}"
        time.sleep(0.05)


def test_a_full_disk_answers_507_and_the_same_key_works_once_space_returns(tmp_path):
    jobs_dir, ctl = tmp_path / "jobs", tmp_path / "ctl"
    records = jobs_dir / "records"
    records.mkdir(parents=True)
    ctl.mkdir()
    wrapper = [
        *("bwrap", "--dev-bind", "/", "/", "--die-with-parent", "--unshare-pid"),
        *("--size", str(RECORDS_TMPFS_BYTES), "--tmpfs", str(records)),
        *("--setenv", "CTL", str(ctl), "--setenv", "RECORDS", str(records)),
        *("--", "sh", "-c", CONTROL_LOOP, "sh"),
    ]
    env = {
        "MODEL_CACHE_DIR": str(tmp_path / "models"),
        "UI": "false",
        "JOBS": "local",
        "JOBS_DIR": str(jobs_dir),
        "JOBS_POLL_S": "0.5",
    }
    key, body = {"Idempotency-Key": "catalogue-1"}, {"prompt": "a full disk", "seed": 12}
    log_path = tmp_path / "service.log"
    with run_app(env, log=log_path, wrapper=wrapper) as (_, url):
        ask(ctl, "fill", "filled")
        for _ in range(2):  # the retry gets the same answer, not a 409
            full = httpx.post(f"{url}/v1/jobs", json=body, headers=key, timeout=60)
            assert full.status_code == 507, full.text
            assert full.json()["error"] == "the job store is out of space; nothing was queued, retry later"
            assert full.headers["retry-after"] == "5"
        ask(ctl, "free", "freed")
        accepted = httpx.post(f"{url}/v1/jobs", json=body, headers=key, timeout=60)
        assert accepted.status_code == 202, accepted.text
        assert "idempotent-replayed" not in accepted.headers
        job_id = accepted.json()["id"]
        deadline = time.monotonic() + 60
        while (state := httpx.get(f"{url}/v1/jobs/{job_id}", timeout=60).json()["state"]) not in (
            "succeeded",
            "failed",
        ):
            assert time.monotonic() < deadline, f"job still {state}"
            time.sleep(0.1)
    assert state == "succeeded"
