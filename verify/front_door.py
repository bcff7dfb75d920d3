"""The front door, from outside: it answers, it refuses an anonymous call, and a signed-in program gets the
image API's answer. A pool at rest behind the starting gate (the trial profile) answers "starting" instead: the
right answer there, recognised as the gate's."""

from __future__ import annotations

from typing import Final

import httpx

from verify.context import Context
from verify.result import Check, Outcome, failed, passed, skipped, verdict
from verify.stacks import SERVING

TIMEOUT_S = 30.0
# What the service's sign-in answers an anonymous call: 401 to a program, a redirect to the sign-in to a browser.
REFUSALS: Final = frozenset({301, 302, 303, 307, 308, 401})
# The starting gate's answer while no serving pod is ready (starting_gate/answer.py): a 503 whose JSON `error` is
# "starting"; tests/verify/test_front_door.py runs the real gate to hold these to it.
STARTING_STATUS: Final = 503
STARTING_ERROR: Final = "starting"


def is_starting(response: httpx.Response) -> bool:
    """The starting gate answered: no serving pod is ready, the pool is scaling up from zero."""
    if response.status_code != STARTING_STATUS:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == STARTING_ERROR


def health(ctx: Context) -> Outcome:
    """The front door reaches the service (`GET /health`)."""
    response = httpx.get(f"{ctx.service_url}health", timeout=TIMEOUT_S, follow_redirects=False)
    return verdict(response.status_code == 200, f"GET /health {response.status_code}")


def refuses_anonymous(ctx: Context) -> Outcome:
    """An API call without a token gets 401 or a redirect to the sign-in, never the answer."""
    response = httpx.get(f"{ctx.service_url}v1/info", timeout=TIMEOUT_S, follow_redirects=False)
    if is_starting(response):
        return skipped("GET /v1/info without a token: 503 starting (the starting gate: no serving pod to refuse it)")
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
    if is_starting(response):
        return passed("GET /v1/info 503 starting (the starting gate: the pool is at zero until demand wakes it)")
    if response.status_code != 200:
        return failed(f"GET /v1/info with a token: {response.status_code}")
    info = response.json()
    return passed(f"GET /v1/info 200, backend {info.get('backend', '?')}, model {info.get('model', '?')}")


CHECKS: Final = (
    Check("front-door-health", health),
    Check("sign-in-refuses-anonymous", refuses_anonymous),
    Check("image-api-answers", image_api_answers),
)
