"""The front door, from outside: it answers, it refuses an anonymous call, and a signed-in program gets the
image API's answer."""

from __future__ import annotations

from typing import Final

import httpx

from verify.context import Context
from verify.result import Check, Outcome, failed, passed, skipped, verdict
from verify.stacks import SERVING

TIMEOUT_S = 30.0
# What the service's sign-in answers an anonymous call: 401 to a program, a redirect to the sign-in to a browser.
REFUSALS: Final = frozenset({301, 302, 303, 307, 308, 401})


def health(ctx: Context) -> Outcome:
    """The front door reaches the service (`GET /health`)."""
    response = httpx.get(f"{ctx.service_url}health", timeout=TIMEOUT_S, follow_redirects=False)
    return verdict(response.status_code == 200, f"GET /health {response.status_code}")


def refuses_anonymous(ctx: Context) -> Outcome:
    """An API call without a token gets 401 or a redirect to the sign-in, never the answer."""
    response = httpx.get(f"{ctx.service_url}v1/info", timeout=TIMEOUT_S, follow_redirects=False)
    return verdict(response.status_code in REFUSALS, f"GET /v1/info without a token: {response.status_code}")


def has_programs_client(ctx: Context) -> bool:
    """The stack signs programs in through Cognito's client-credentials grant (authMode cognito)."""
    return ctx.output(SERVING, "TokenUrl") is not None


def image_api_answers(ctx: Context) -> Outcome:
    """A signed-in program reaches the image service: `GET /v1/info` answers with the backend it runs."""
    if not has_programs_client(ctx):
        return skipped("no TokenUrl output (sign-in is not Cognito): no programs' client to sign in with")
    response = httpx.get(
        f"{ctx.service_url}v1/info",
        headers={"Authorization": f"Bearer {ctx.token()}"},
        timeout=TIMEOUT_S,
        follow_redirects=False,
    )
    if response.status_code != 200:
        return failed(f"GET /v1/info with a token: {response.status_code}")
    info = response.json()
    return passed(f"GET /v1/info 200, backend {info.get('backend', '?')}, model {info.get('model', '?')}")


CHECKS: Final = (
    Check("front-door-health", health),
    Check("sign-in-refuses-anonymous", refuses_anonymous),
    Check("image-api-answers", image_api_answers),
)
