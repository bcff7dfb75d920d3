"""Sign-in through the real HTTP stack: a local RSA key plays the Cognito user pool (its JWKS and
token endpoint served by a second loopback server), the service runs with AUTH=cognito."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import jwt
import pytest

from app.settings import load_settings
from common.auth.browser import FLOW_COOKIE, SESSION_COOKIE, BrowserSignIn
from common.auth.tokens import TokenVerifier
from common.settings import SettingsError
from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.support.fake_user_pool import UI_CLIENT, FakeUserPool, new_key

PUBLIC_URL = "http://127.0.0.1:9"  # where browsers would reach the service (only used in redirects)


@pytest.fixture(scope="module")
def pool() -> Iterator[FakeUserPool]:
    with FakeUserPool().serving() as fake:
        yield fake


@pytest.fixture(scope="module")
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(scope="module")
def live(pool: FakeUserPool, backend: FakeBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serve(
        tmp_path_factory.mktemp("auth-cache"),
        lambda _s: backend,
        ui=False,
        **pool.service_settings(),
        public_url=PUBLIC_URL,
    ) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30, follow_redirects=False) as c:
        yield c


def _generate(client: httpx.Client, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return client.post("/v1/generate", json={"prompt": "a fox", "seed": 3}, headers=headers)


def test_probes_answer_without_a_token(client):
    assert client.get("/health").status_code == 200
    assert client.get("/readiness").status_code == 200


def test_a_valid_access_token_reaches_the_service(client, pool, backend):
    before = len(backend.batches)
    response = _generate(client, pool.token())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert len(backend.batches) == before + 1


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        (None, "sign in first"),
        ({"exp": int(time.time()) - 60}, "expired"),
        ({"client_id": "someone-elses-client"}, "app client"),
        ({"iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_other"}, "another issuer"),
        ({"token_use": "id"}, "access token is required"),
        ({"token_use": None}, "token_use"),
        ({"key": new_key()}, "signature"),
    ],
    ids=["missing", "expired", "wrong-client", "wrong-issuer", "id-token", "no-token-use", "forged"],
)
def test_a_bad_token_gets_401_with_a_reason_and_never_reaches_the_queue(client, pool, backend, claims, reason):
    before = len(backend.batches)
    response = _generate(client, None if claims is None else pool.token(**claims))
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/json"
    assert reason in response.json()["error"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert len(backend.batches) == before


def test_garbage_and_unknown_keys_are_refused(client, pool):
    assert "well-formed" in _generate(client, "not-a-jwt").json()["error"]
    other_kid = jwt.encode({"sub": "x"}, pool.key, algorithm="RS256", headers={"kid": "rotated-away"})
    assert "does not publish" in _generate(client, other_kid).json()["error"]


def test_the_api_docs_need_sign_in_too(client, pool):
    assert client.get("/docs").status_code == 401
    assert client.get("/docs", headers={"authorization": f"Bearer {pool.token()}"}).status_code == 200


def test_a_browser_signs_in_with_pkce_and_gets_an_httponly_session(client, pool):
    page = client.get("/docs?x=1", headers={"accept": "text/html"})
    assert page.status_code == 302
    assert page.headers["location"] == "/auth/login?next=%2Fdocs%3Fx%3D1"

    login = client.get(page.headers["location"])
    assert login.status_code == 302
    authorize = urlparse(login.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == f"{pool.url}/oauth2/authorize"
    query = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert query["client_id"] == UI_CLIENT and query["response_type"] == "code"
    assert query["redirect_uri"] == f"{PUBLIC_URL}/auth/callback"
    assert query["code_challenge_method"] == "S256"
    flow_cookie = login.cookies[FLOW_COOKIE]
    assert "httponly" in login.headers["set-cookie"].lower()

    # Cognito's managed login would now sign the user in and send the browser back with a code.
    pool.challenges["code-1"] = query["code_challenge"]
    back = client.get(
        "/auth/callback", params={"code": "code-1", "state": query["state"]}, cookies={FLOW_COOKIE: flow_cookie}
    )
    assert back.status_code == 302, back.text
    assert back.headers["location"] == "/docs?x=1"
    session = back.cookies[SESSION_COOKIE]
    set_cookie = back.headers.get_list("set-cookie")
    assert any(
        c.startswith(SESSION_COOKIE) and "httponly" in c.lower() and "samesite=lax" in c.lower() for c in set_cookie
    )

    assert client.get("/docs", cookies={SESSION_COOKIE: session}).status_code == 200
    logout = client.get("/auth/logout", cookies={SESSION_COOKIE: session})
    assert logout.status_code == 302 and logout.headers["location"].startswith(
        f"{pool.url}/logout?client_id={UI_CLIENT}"
    )


def test_a_callback_without_the_flow_cookie_or_with_a_replayed_code_is_refused(client, pool):
    login = client.get("/auth/login")
    state = parse_qs(urlparse(login.headers["location"]).query)["state"][0]
    stale = client.get("/auth/callback", params={"code": "code-1", "state": state})
    assert stale.status_code == 400 and "open /auth/login again" in stale.json()["error"]
    wrong_code = client.get(
        "/auth/callback",
        params={"code": "never-issued", "state": state},
        cookies={FLOW_COOKIE: login.cookies[FLOW_COOKIE]},
    )
    assert wrong_code.status_code == 400 and "refused" in wrong_code.json()["error"]


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "docs"])
def test_sign_in_never_sends_the_browser_to_another_site(client, target):
    login = client.get("/auth/login", params={"next": target})
    assert login.cookies[FLOW_COOKIE].endswith(".%2F")


def test_cookies_are_secure_when_the_public_url_is_https(pool):
    browser = BrowserSignIn(
        verifier=TokenVerifier(pool.issuer, [UI_CLIENT]),
        client_id=UI_CLIENT,
        login_url=pool.url,
        public_url="https://sd.example.com",
        http=httpx.AsyncClient(),
    )
    cookie = browser.login("/").headers["set-cookie"].lower()
    assert "secure" in cookie and "httponly" in cookie and "path=/auth/" in cookie


def test_an_expired_browser_session_goes_back_to_sign_in(client, pool):
    expired = pool.token(client_id=UI_CLIENT, exp=int(time.time()) - 5)
    page = client.get("/", headers={"accept": "text/html"}, cookies={SESSION_COOKIE: expired})
    assert page.status_code == 302 and page.headers["location"].startswith("/auth/login")


def test_cognito_mode_without_its_settings_is_a_readable_error(tmp_path: Path):
    with pytest.raises(SettingsError, match="AUTH_ISSUER is required"):
        load_settings(auth="cognito", model_cache_dir=tmp_path)
    with pytest.raises(SettingsError, match="must be an https:// URL"):
        load_settings(
            auth="cognito",
            auth_issuer="http://cognito.example/pool",
            auth_client_ids="a",
            auth_ui_client_id="a",
            auth_login_url="https://login.example",
            public_url="https://sd.example",
        )


def test_the_openai_sdk_signs_in_with_its_api_key_and_reads_the_refusal(live, pool):
    import openai

    def images(token: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{live.url}/v1", api_key=token, max_retries=0, timeout=30).images

    answer = images(pool.token()).generate(prompt="a fox", size="64x64")
    assert answer.data is not None and answer.data[0].b64_json
    with pytest.raises(openai.AuthenticationError) as caught:
        images("not-a-token").generate(prompt="a fox")
    assert caught.value.type == "authentication_error" and caught.value.message != "Error code: 401"
