"""Refuse Gradio requests that name a function or component the UI does not have, or call a function
with too few values, before Gradio sees them.

Gradio 6.31 looks these ids up without a check: `fn_index` in `route_utils.get_fn` (behind
`/gradio_api/queue/join` and the predict routes) and `component_id` in `routes.component_server`.
An unknown id is a KeyError there and a missing `fn_index` on a predict route a FnIndexInferError,
which Gradio's own app answers with a 500. Too few values pass the queue and then fail in
`Blocks.validate_inputs`, whose ValueError the page shows as a bare "Error" (its text is hidden
outside debug mode, and would echo the values). This middleware sits inside the body limit, so the
body it reads is already bounded, and answers a JSON 4xx in the API's error shape instead; every
other request passes through untouched.

A 422 carries `detail` as the API's does: the page's client (gradio 6.31 `@gradio/client`, `submit`)
shows a 422's `detail` list, not its `error`, so the message reaches the page too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.middleware import replaying, send_json_error
from common.image_api_paths import UI_QUEUE_JOIN_PATH

GRADIO_API_PREFIX = "/gradio_api/"  # gradio 6.31 routes.py API_PREFIX
COMPONENT_SERVER_PATH = "/gradio_api/component_server"
# The two routes the page calls functions through (app/ui_routes.py serves no other).
QUEUE_JOIN_PATH = UI_QUEUE_JOIN_PATH
RUN_PREFIX = "/gradio_api/run/"
PREDICT_PATH = RUN_PREFIX + "predict"  # gradio 6.31 `/run/{api_name}`: without fn_index, found by api_name


@dataclass(frozen=True)
class Refusal:
    """A 4xx for a Gradio request: on a 422 the field it names is the API's `detail`."""

    status: int
    field: str
    message: str

    @property
    def error(self) -> str:
        prefix = "invalid request: " if self.status == 422 else ""
        return f"{prefix}{self.field}: {self.message}"

    @property
    def detail(self) -> list[dict[str, str]] | None:
        return [{"field": self.field, "message": self.message}] if self.status == 422 else None


class GradioIdGuard:
    """422 for a missing or unknown `fn_index` or too few values, 404 for an unknown `component_id`, on
    Gradio's POST routes."""

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
            await send_json_error(send, refusal.status, refusal.error, detail=refusal.detail, close=False)
            return
        await self.app(scope, replaying(message, receive), send)

    def _refusal(self, path: str, fields: dict[str, Any] | None) -> Refusal | None:
        """Why the body cannot be served (an id the UI does not have, too few values); None if it can."""
        if fields is None:
            return None  # not a JSON object or a form: Gradio's own validation answers it
        session = fields.get("session_hash")
        if path == COMPONENT_SERVER_PATH:
            component = _as_int(fields.get("component_id"))
            if component is not None and not self._has_component(session, component):
                return Refusal(404, "component_id", f"the UI has no component {component}")
            return None
        if fields.get("fn_index") is None:
            if path == QUEUE_JOIN_PATH or (path == PREDICT_PATH and self._named_fn(path, session) is None):
                return Refusal(422, "fn_index", "required: the number of the UI function to call (see /config)")
            return None
        fn_index = _as_int(fields["fn_index"])
        if fn_index is None:
            return None  # not a number: Gradio's request model answers it
        fns = self._fns(session)
        if fn_index not in fns:
            return Refusal(422, "fn_index", f"the UI has no function {fn_index}")
        return _too_few_values(fns[fn_index], fields.get("data"))

    def _named_fn(self, path: str, session: object) -> Any | None:
        """The function a `/run/{api_name}` call without fn_index reaches (gradio 6.31 `get_fn`), if any."""
        api_name = path.removeprefix(RUN_PREFIX)
        return next((fn for fn in self._fns(session).values() if fn.api_name == api_name), None)

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


def _too_few_values(fn: Any, data: object) -> Refusal | None:
    """422 when `data` has fewer values than the function has inputs (Gradio ignores extra ones)."""
    if not isinstance(data, list) or len(data) >= len(fn.inputs):
        return None  # data that is not a list is Gradio's request model's to answer
    names = ", ".join(str(getattr(block, "label", None) or type(block).__name__) for block in fn.inputs)
    return Refusal(422, "data", f"{len(fn.inputs)} values expected ({names}), got {len(data)}")


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
