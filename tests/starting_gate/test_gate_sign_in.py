"""Sign-in through the starting gate, with the stand-in user pool: the gate keeps nothing of one client for another
(a stranger after a signed-in user is a stranger), and while the pool is cold only a signed-in request for images
counts as the demand that starts a GPU node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from common.auth.browser import SESSION_COOKIE
from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.starting_gate.gate_server import ServedGate, serving_gate
from tests.support.fake_user_pool import FakeUserPool, new_key

GENERATE = {"prompt": "a fox", "seed": 3}
HTML = {"accept": "text/html"}


@pytest.fixture(scope="module")
def pool() -> Iterator[FakeUserPool]:
    with FakeUserPool().serving() as fake:
        yield fake


@pytest.fixture(scope="module")
def warm(pool: FakeUserPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedGate, LiveServer]]:
    """The image service with sign-in on (a fake model), and a gate in front of it with the same sign-in."""
    # The service's PUBLIC_URL names its own sign-in routes, which the gate answers in front of it.
    service_settings = {**pool.service_settings(), "public_url": "http://127.0.0.1:9"}
    cache = tmp_path_factory.mktemp("gate-auth")
    with (
        serve(cache, lambda _s: FakeBackend(), ui=False, **service_settings) as live,
        serving_gate(upstream_url=live.url, **pool.service_settings()) as gate,
    ):
        yield gate, live


@pytest.fixture
def cold(pool: FakeUserPool) -> Iterator[ServedGate]:
    """A gate with sign-in on in front of a pool with no ready pod."""
    with serving_gate(**pool.service_settings()) as gate:
        yield gate


def sign_in(client: httpx.Client, pool: FakeUserPool) -> httpx.Response:
    """What a browser does: open a page, follow the sign-in through the gate and the user pool, land on the page."""
    return client.get("/docs", headers=HTML, follow_redirects=True)


def test_a_stranger_after_a_signed_in_user_is_still_a_stranger(warm, pool):
    gate, _ = warm
    with httpx.Client(base_url=gate.url, timeout=30) as user_a:
        page = sign_in(user_a, pool)
        assert page.status_code == 200, page.text
        assert SESSION_COOKIE in user_a.cookies  # the gate's callback set it in user A's browser only
        assert user_a.post("/v1/generate", json=GENERATE).status_code == 200

    with httpx.Client(base_url=gate.url, timeout=30) as stranger:
        assert stranger.post("/v1/generate", json=GENERATE).status_code == 401
        assert stranger.post("/v1/jobs", json=GENERATE).status_code == 401
        page = stranger.get("/docs", headers=HTML)
        assert page.status_code == 302 and page.headers["location"].startswith("/auth/login")

    user_b = {"authorization": f"Bearer {pool.token(sub='user-2')}"}
    with httpx.Client(base_url=gate.url, timeout=30) as program:
        assert program.post("/v1/generate", json=GENERATE, headers=user_b).status_code == 200
        assert program.post("/v1/generate", json=GENERATE).status_code == 401  # its next request has no token


def test_the_sign_in_sets_its_cookies_as_separate_fields(warm, pool):
    gate, _ = warm
    with httpx.Client(base_url=gate.url, timeout=30) as browser:
        login = browser.get("/auth/login", params={"next": "/docs"})
        authorize = browser.get(login.headers["location"])  # the user pool signs the user in at once
        callback = urlparse(authorize.headers["location"])
        assert f"{callback.scheme}://{callback.netloc}" == gate.url
        back = browser.get(callback.path, params={k: v[0] for k, v in parse_qs(callback.query).items()})
    assert back.status_code == 302, back.text
    fields = back.headers.get_list("set-cookie")
    assert len(fields) == 2  # the session set, the sign-in's flow cookie deleted: two fields, never one
    assert fields[0].startswith(f"{SESSION_COOKIE}=") and "httponly" in fields[0].lower()


def test_a_stranger_never_wakes_the_pool(cold, pool):
    with httpx.Client(base_url=cold.url, timeout=30) as stranger:
        refused = stranger.post("/v1/generate", json=GENERATE)
        assert refused.status_code == 401 and "sign in" in refused.json()["error"]
        assert refused.headers["www-authenticate"].startswith("Bearer")
        openai = stranger.post("/v1/images/generations", json={"prompt": "a fox"})
        assert openai.status_code == 401 and openai.json()["error"]["type"] == "authentication_error"
        page = stranger.get("/", headers=HTML)
        assert page.status_code == 302 and page.headers["location"] == "/auth/login?next=%2F"
        assert stranger.get("/robots.txt").status_code == 401
        forged = {"authorization": f"Bearer {pool.token(key=new_key())}"}
        assert stranger.post("/v1/generate", json=GENERATE, headers=forged).status_code == 401
        for method in ("POST", "OPTIONS", "DELETE", "PUT"):
            assert stranger.request(method, "/health").status_code == 405
        # The sign-in itself works while the pool is cold: the gate serves it.
        login = stranger.get("/auth/login", params={"next": "/"})
        assert login.status_code == 302 and login.headers["location"].startswith(f"{pool.url}/oauth2/authorize")
    assert cold.gate.demand.total == 0


def test_a_signed_in_request_for_images_wakes_the_pool(cold, pool):
    token = {"authorization": f"Bearer {pool.token()}"}
    with httpx.Client(base_url=cold.url, timeout=30) as user:
        info = user.get("/v1/info", headers=token)
        assert info.status_code == 503 and info.json()["error"] == "starting"
        assert cold.gate.demand.total == 0  # reading is not asking for images

        starting = user.post("/v1/generate", json=GENERATE, headers=token)
        assert starting.status_code == 503 and starting.headers["retry-after"] == "30"
        assert cold.gate.demand.total == 1

        openai = user.post("/v1/images/generations", json={"prompt": "a fox"}, headers=token)
        assert openai.status_code == 503 and openai.json()["error"]["code"] == "starting"
        assert user.post("/v1/jobs", json=GENERATE, headers=token).status_code == 503
        assert cold.gate.demand.total == 3

        # A person with a session opening the UI: the page that reloads, and the demand it stands for.
        page = user.get("/", headers=HTML, cookies={SESSION_COOKIE: pool.token()})
        assert page.status_code == 503 and "starting" in page.text
        assert cold.gate.demand.total == 4


def test_the_gate_refuses_to_start_without_its_sign_in_settings(tmp_path: Path):
    from common.settings import SettingsError
    from starting_gate.settings import load_settings

    with pytest.raises(SettingsError, match="AUTH_UI_CLIENT_ID is required"):
        load_settings(upstream_url="http://pool:8000", auth="cognito", auth_issuer="https://x", auth_client_ids="a")
