"""AUTH=cognito as clients see it when things go wrong: an identity provider that fails or answers
garbage, made-up key ids, and job image links, through the real HTTP stack of service and pool."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse, urlsplit

import httpx
import jwt
import pytest

from app.bench.inprocess import serve_in_thread
from common.auth.browser import FLOW_COOKIE
from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.support.fake_user_pool import FakeUserPool

PUBLIC_URL = "http://127.0.0.1:9"  # where clients reach the service: never this test's loopback port


@dataclass
class Faults:
    """What the pool does wrong right now, and how often its JWKS was asked for."""

    jwks_down: bool = False
    token_reply: bytes | None = None  # a 200 body for /oauth2/token instead of the real one
    token_down: bool = False
    jwks_requests: int = 0


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[FakeUserPool, Faults]]:
    fake, faults = FakeUserPool(), Faults()
    inner = fake.app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        status, body = None, b""
        if path.endswith("/jwks.json"):
            faults.jwks_requests += 1
            if faults.jwks_down:
                status, body = 503, b"down"
        elif path == "/oauth2/token" and faults.token_down:
            status, body = 599, b""  # not HTTP the client accepts: httpx raises
        elif path == "/oauth2/token" and faults.token_reply is not None:
            status, body = 200, faults.token_reply
        if status is None:
            await inner(scope, receive, send)
            return
        if status == 599:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
            await send({"type": "http.response.body", "body": b"cut short"})  # fewer bytes than promised
            return
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})

    with serve_in_thread(app) as url:
        fake.url = url
        yield fake, faults


@pytest.fixture(scope="module")
def live(pool: tuple[FakeUserPool, Faults], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    fake, _ = pool
    with serve(
        tmp_path_factory.mktemp("sign-in-clients"),
        lambda _s: FakeBackend(),
        ui=False,
        **fake.service_settings(),
        public_url=PUBLIC_URL,
        jobs="local",
        jobs_dir=tmp_path_factory.mktemp("jobs"),
        jobs_poll_s=1.0,
    ) as server:
        yield server


def _callback(client: httpx.Client, fake: FakeUserPool) -> httpx.Response:
    """Start a sign-in and come back with a code the pool issued for it."""
    login = client.get("/auth/login")
    query = {k: v[0] for k, v in parse_qs(urlparse(login.headers["location"]).query).items()}
    fake.challenges["code-x"] = query["code_challenge"]
    return client.get(
        "/auth/callback",
        params={"code": "code-x", "state": query["state"]},
        cookies={FLOW_COOKIE: login.cookies[FLOW_COOKIE]},
    )


def test_while_the_keys_cannot_be_fetched_made_up_key_ids_do_not_each_fetch_them(live, pool):
    fake, faults = pool
    faults.jwks_down = True
    try:
        before = faults.jwks_requests
        with httpx.Client(base_url=live.url, timeout=30) as client:
            for i in range(20):
                token = jwt.encode({"sub": "x"}, fake.key, algorithm="RS256", headers={"kid": f"made-up-{i}"})
                response = client.get("/v1/info", headers={"authorization": f"Bearer {token}"})
                assert response.status_code == 503
                assert response.json() == {"error": "sign-in is unavailable right now; try again shortly"}
        assert faults.jwks_requests - before == 1
    finally:
        faults.jwks_down = False
    time.sleep(2.1)  # the retry interval after a failed fetch
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = client.get("/v1/info", headers={"authorization": f"Bearer {fake.token()}"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "reply",
    [b"<html>gateway error</html>", b"[1, 2]", b'{"access_token": 5}', b'{"access_token": "x", "expires_in": "soon"}'],
)
def test_a_malformed_token_reply_is_a_readable_502(live, pool, reply: bytes):
    fake, faults = pool
    faults.token_reply = reply
    try:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            response = _callback(client, fake)
    finally:
        faults.token_reply = None
    assert response.status_code == 502
    assert response.json() == {"error": "the sign-in service sent an unreadable reply: open /auth/login again"}


def test_a_token_endpoint_that_fails_mid_reply_shows_no_client_exception_text(live, pool):
    fake, faults = pool
    faults.token_down = True
    try:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            response = _callback(client, fake)
    finally:
        faults.token_down = False
    assert response.status_code == 502
    message = response.json()["error"]
    assert message.startswith("the sign-in service did not answer (error id ")
    assert "peer" not in message.lower() and "incomplete" not in message.lower() and fake.url not in message


def test_a_job_image_link_works_without_a_token_and_names_the_public_url(live, pool):
    fake, _ = pool
    auth = {"authorization": f"Bearer {fake.token(sub='carol')}"}
    with httpx.Client(base_url=live.url, timeout=30) as client:
        job = client.post("/v1/jobs", json={"prompt": "a fox", "steps": 2}, headers=auth).json()
        deadline = time.monotonic() + 30
        while (status := client.get(job["status_url"], headers={**auth, "host": "evil.example"}).json())[
            "state"
        ] != "succeeded":
            assert time.monotonic() < deadline and status["state"] != "failed", status
            time.sleep(0.1)
        link = urlsplit(status["image_url"])
        assert f"{link.scheme}://{link.netloc}" == PUBLIC_URL  # not the Host header the request came with
        image = client.get(f"{link.path}?{link.query}")  # no token: the signature is the credential
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
        forged = client.get(f"{link.path}?expires={2**40}&signature={'0' * 64}")
        assert forged.status_code == 403
