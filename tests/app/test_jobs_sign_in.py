"""Jobs belong to the signed-in caller: with AUTH=cognito, the subject the sign-in middleware verified
is the owner, so one user cannot read another's job (through the real HTTP stack)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.support.fake_user_pool import FakeUserPool


@pytest.fixture(scope="module")
def pool() -> Iterator[FakeUserPool]:
    with FakeUserPool().serving() as fake:
        yield fake


@pytest.fixture(scope="module")
def live(pool: FakeUserPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serve(
        tmp_path_factory.mktemp("jobs-auth-cache"),
        lambda _s: FakeBackend(),
        ui=False,
        **pool.service_settings(),
        public_url="http://127.0.0.1:9",
        jobs="local",
        jobs_dir=tmp_path_factory.mktemp("jobs"),
    ) as server:
        yield server


def test_a_job_is_visible_to_its_submitter_only(live, pool):
    alice = {"authorization": f"Bearer {pool.token(sub='alice')}"}
    bob = {"authorization": f"Bearer {pool.token(sub='bob')}"}
    with httpx.Client(base_url=live.url, timeout=30) as client:
        assert client.post("/v1/jobs", json={"prompt": "a fox"}).status_code == 401
        submitted = client.post("/v1/jobs", json={"prompt": "a fox", "steps": 2}, headers=alice)
        assert submitted.status_code == 202, submitted.text
        status_url = submitted.json()["status_url"]
        assert client.get(status_url, headers=alice).status_code == 200
        other = client.get(status_url, headers=bob)
        assert other.status_code == 404, "another user's job must read as absent"
