"""Refuse Gradio requests that name a function or component the UI does not have, before Gradio sees them.

Gradio 6.31 looks these ids up without a check: `fn_index` in `route_utils.get_fn` (behind
`/gradio_api/queue/join` and the predict routes) and `component_id` in `routes.component_server`.
An unknown id is a KeyError there, which Gradio's own app answers with a plain-text 500. This
middleware sits inside the body limit, so the body it reads is already bounded, and answers a JSON
4xx in the API's error shape instead; every other request passes through untouched.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.middleware import replaying, send_json_error

GRADIO_API_PREFIX = "/gradio_api/"  # gradio 6.31 routes.py API_PREFIX
COMPONENT_SERVER_PATH = "/gradio_api/component_server"


class GradioIdGuard:
    """422 for an unknown `fn_index`, 404 for an unknown `component_id`, on Gradio's POST routes."""

    def __init__(self, app: ASGIApp, blocks: Any):  # blocks: gradio.Blocks (imported only with the UI)
        self.app = app
        self.blocks = blocks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(GRADIO_API_PREFIX):
            await self.app(scope, receive, send)
            return
        message = await receive()  # the body limit (outside this) replays the whole body in one message
        refusal = self._refusal(scope["path"].rstrip("/"), await _fields(scope, message))
        if refusal is not None:
            await send_json_error(send, *refusal, close=False)
            return
        await self.app(scope, replaying(message, receive), send)

    def _refusal(self, path: str, fields: dict[str, Any] | None) -> tuple[int, str] | None:
        """(status, message) when the body names an id the UI does not have; None otherwise."""
        if fields is None:
            return None  # not a JSON object or a form: Gradio's own validation answers it
        session = fields.get("session_hash")
        fn_index = _as_int(fields.get("fn_index"))
        if fn_index is not None and fn_index not in self._fns(session):
            return 422, f"fn_index: the UI has no function {fn_index}"
        component = _as_int(fields.get("component_id"))
        if path == COMPONENT_SERVER_PATH and component is not None and not self._has_component(session, component):
            return 404, f"component_id: the UI has no component {component}"
        return None

    def _fns(self, session: object) -> dict[int, Any]:
        """The functions a request of this session may call (Gradio's get_fn looks in the same place)."""
        holder = self.blocks.state_holder
        if isinstance(session, str) and session in holder:
            return holder[session].blocks_config.fns
        return self.blocks.fns

    def _has_component(self, session: object, component: int) -> bool:
        holder = self.blocks.state_holder
        if isinstance(session, str) and session in holder and component in holder[session]:
            return True
        return component in self.blocks.blocks


_INT = TypeAdapter(int)


def _as_int(value: object) -> int | None:
    """The id as Gradio's request models read it (pydantic's lax int: 3, 3.0, "3"), or None."""
    if value is None:
        return None
    try:
        return _INT.validate_python(value)
    except ValidationError:
        return None


async def _fields(scope: Scope, message: Message) -> dict[str, Any] | None:
    """The body's top-level fields: a JSON object, or a form's text fields; None for anything else."""
    body = message.get("body", b"")
    content_type = dict(scope["headers"]).get(b"content-type", b"")
    if content_type.startswith(b"multipart/form-data"):

        async def once() -> Message:
            return message

        try:
            async with Request(scope, once).form() as form:
                return {key: value for key, value in form.multi_items() if isinstance(value, str)}
        except Exception:  # malformed forms are Gradio's to answer
            return None
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) else None
