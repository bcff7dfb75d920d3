"""The gateway's ASGI application: probes, sign-in, limits, and the forwarding of the OpenAI paths to vLLM.

Plain ASGI (no web framework): the gateway reads the request, decides, and forwards bytes to vLLM through aiohttp
(llm_gateway/engine_client.py). A generation runs beside two watchers, the client's disconnect and the drain's
cut; whichever ends first decides. Cancelling the forwarding closes the upstream connection, and vLLM aborts a
request whose connection closes, so a client that goes away stops its generation (and frees its KV cache).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import aiohttp

from common.auth.tokens import TokenVerifier
from common.http.asgi import Message, Receive, Scope, Send
from common.http.body import BodyTooLarge, read_body
from common.http.disconnect import ClientDisconnected, WorkCut, unless_disconnected
from common.http.protocol import BODY_NOWAIT, BodyNowait
from common.logs import batched_log_lines, info_fields, log_failure
from common.metrics.flusher import run_flusher
from common.metrics.publishers import Publisher
from common.metrics.recorder import MetricsRecorder
from common.probe_paths import HEALTH_PATH, READINESS_PATH
from common.version import VERSION
from llm_gateway.admission import Admission, Ticket
from llm_gateway.auth import CHALLENGE, check_caller
from llm_gateway.chat_page import send_page
from llm_gateway.engine_client import (
    CONNECT_FAILURES,
    AnswerTooLarge,
    EngineClient,
    EngineError,
    get_within,
    post_within,
    read_within,
)
from llm_gateway.errors import send_error, sse_error_event
from llm_gateway.lookups import LookupLimit
from llm_gateway.metrics_bridge import MetricsBridge
from llm_gateway.model_card import model_id, retrieve
from llm_gateway.model_list import ImageModels
from llm_gateway.request_checks import (
    REQUEST_ID_HEADER,
    Refusal,
    check_fields,
    check_request_id,
    parse_body,
    sequences,
)
from llm_gateway.routes import (
    CHAT_PAGE_PATH,
    FORWARDED,
    GENERATION_PATHS,
    MODEL_PATH_PREFIX,
    MODELS_PATH,
    RENDER_PATHS,
    RESPONSES_PATH,
    STREAM_OPTIONS_PATHS,
    UPSTREAM_HEALTH_PATH,
)
from llm_gateway.settings import GatewaySettings
from llm_gateway.structured_outputs import check_structured_outputs
from llm_gateway.unserved import is_unserved, unserved_body
from llm_gateway.usage import EventStream, RequestRecord, with_usage_asked

log = logging.getLogger("llm_gateway")
# An SSE comment: every client ignores it (its first character is a colon); proxies see bytes flowing.
HEARTBEAT = b": keep-alive\n\n"
READINESS_TIMEOUT_S = 2.0
# Request headers passed on to vLLM besides the body's type: its request id, for tracing one request in both logs.
FORWARDED_REQUEST_HEADERS = (b"x-request-id",)
# Response headers passed back: the body's type and vLLM's request id.
FORWARDED_RESPONSE_HEADERS = ("content-type", "x-request-id")
# The probes answer GET only, as every other path answers its one method.
GET_ONLY = {HEALTH_PATH: "GET", READINESS_PATH: "GET"}
FINISHED_WRITE_DELAY_S = 0.02
"""Ended requests are logged and counted this long after they end, together: streams that end at once are followed
at once by their clients' next requests, whose forwarding then does not wait behind the bookkeeping."""
HEALTH_BODY_BYTES = 64 * 1024
"""The most of the engine's /health answer read (vLLM's is empty)."""
LAST_EVENT_WAIT_S = 0.005
"""How long a stream's last event waits for the end of the engine's body, to go out with the response's end."""
BODY_END_WAIT_S = 1.0
"""After a stream's last event (`[DONE]`), how long the gateway waits for the engine's body to end (vLLM ends it
right after), so the connection goes back to the pool; an engine that does not end it loses the connection."""
AFTER_LAST_EVENT_BYTES = 64 * 1024
"""Bytes after a stream's last event are dropped; past this many the connection is closed instead."""


class DeliveryTooSlow(Exception):
    """A stream has waited DELIVERY_WAIT_S in all for its client to read: the client is cut."""


@dataclass
class Reply:
    """Whether the response's status line went out (after that, errors can only end the stream), whether it is a
    stream, whether its last event is being handed over (the engine is done with it: its admission slot is free),
    whether its last event went out (a client that then hangs up got the whole answer), and how long its writes have
    waited for the client to read, in all."""

    started: bool = False
    streaming: bool = False
    last_event: bool = False
    finished: bool = False
    waited_s: float = 0.0
    write_nowait: BodyNowait | None = None  # the server's write without a wait, if it has one


class Gateway:
    """The ASGI app."""

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        http: EngineClient,
        verifier: TokenVerifier | None,
        publisher: Publisher | None = None,
    ) -> None:
        self.settings = settings
        self.http = http
        self.verifier = verifier
        self.admission = Admission(settings.max_concurrent_requests)
        self.lookups = LookupLimit(settings.max_concurrent_lookups)
        self._retry_after = [(b"retry-after", str(settings.retry_after_s).encode())]
        self._body_limits = settings.body_limits  # made once: every generation reads its body with them
        self.image_models = ImageModels(settings.image_models)
        self.metrics = MetricsBridge(MetricsRecorder(settings.deployment_unit, settings.accelerator), http)
        self._publisher = publisher
        self._flusher: asyncio.Task[None] | None = None
        self._finished: list[RequestRecord] = []
        self._finished_timer: asyncio.TimerHandle | None = None
        self._health: asyncio.Future[int] | None = None  # the engine's /health check in flight, if one is

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch one ASGI connection event; a failure of ours is a JSON 500 with an error id, not a traceback."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not served; returning closes the handshake
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._dispatch(scope, receive, tracking_send)
        except Exception as exc:
            error_id = log_failure(log, "request failed", exc)
            if not started:
                await send_error(send, 500, f"internal error (error id {error_id})")

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == HEALTH_PATH and method == "GET":
            await _send_json(send, 200, {"status": "alive", "version": VERSION})
            return
        if path == READINESS_PATH and method == "GET":
            await self._readiness(send)
            return
        if path == CHAT_PAGE_PATH and self.settings.chat_page and method == "GET":
            await send_page(send)
            return
        expected_method = (
            GET_ONLY.get(path) or FORWARDED.get(path) or _model_path_method(path) or self._render_method(path)
        )
        if expected_method is None:
            await send_error(send, 404, f"no route {path}: this server serves {', '.join(FORWARDED)}")
            return
        if method != expected_method:
            await send_error(
                send,
                405,
                f"{path} takes {expected_method}, not {method}",
                headers=[(b"allow", expected_method.encode())],
            )
            return
        headers = dict(scope["headers"])
        refusal = await check_caller(self.verifier, headers)
        if refusal is not None:
            await send_error(
                send, refusal.status, refusal.message, headers=[CHALLENGE] if refusal.status == 401 else []
            )
            return
        if path in GENERATION_PATHS:
            await self._generation(path, headers, receive, send, scope.get("extensions", {}).get(BODY_NOWAIT))
        elif path in RENDER_PATHS:
            await self._render(path, headers, receive, send)
        elif path.startswith(MODEL_PATH_PREFIX):
            await self._retrieve_model(model_id(path), send)
        else:
            await self._forward_get(path, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._publisher is not None:
                    bridge, interval_s = self.metrics, self.settings.metrics_flush_s
                    flusher = run_flusher(bridge.recorder, self._publisher, interval_s, bridge.sample_engine)
                    self._flusher = asyncio.create_task(flusher, name="metrics-flusher")
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._write_finished()
                if self._flusher is not None:  # after the drain: the last flush counts the drained requests
                    self._flusher.cancel()
                    with suppress(asyncio.CancelledError):
                        await self._flusher
                await self.http.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _readiness(self, send: Send) -> None:
        if self.admission.draining:
            await send_error(send, 503, "shutting down")
            return
        try:
            status = await self._engine_health()
        except (EngineError, AnswerTooLarge, TimeoutError) as exc:
            await send_error(send, 503, f"the engine does not answer yet ({type(exc).__name__})")
            return
        if status != 200:
            await send_error(send, 503, f"the engine is not healthy (its /health answered {status})")
            return
        await _send_json(send, 200, {"status": "ready"})

    async def _engine_health(self) -> int:
        """The status of the engine's /health. Probes that come while a check runs share its answer: however many
        come, the checks hold one engine connection (settings.ENGINE_PROBE_CONNECTIONS)."""
        if self._health is None or self._health.done():
            self._health = asyncio.ensure_future(self._check_engine())
            self._health.add_done_callback(_retrieve_outcome)
        return await asyncio.shield(self._health)

    async def _check_engine(self) -> int:
        async with asyncio.timeout(READINESS_TIMEOUT_S):
            status, _, _ = await get_within(self.http, UPSTREAM_HEALTH_PATH, HEALTH_BODY_BYTES)
        return status

    async def _forward_get(self, path: str, send: Send) -> None:
        answer = await self._lookup(path, send)
        if answer is None:
            return
        status, headers, content = answer
        if path == MODELS_PATH and status == 200:
            content = self.image_models.add_to(content)
        await _send_whole(send, status, headers, content)

    async def _retrieve_model(self, wanted: str, send: Send) -> None:
        """OpenAI's retrieve-model answer, from the engine's model list (llm_gateway/model_card.py)."""
        answer = await self._lookup(MODELS_PATH, send)
        if answer is None:
            return
        status, headers, content = answer
        if status != 200:
            await _send_whole(send, status, headers, content)
            return
        card = retrieve(self.image_models.add_to(content), wanted)
        await _send_whole(send, card.status, _JSON, card.body)

    def _render_method(self, path: str) -> str | None:
        """POST for a render route when RENDER_ROUTES is on (else the path is not served: a 404)."""
        return "POST" if self.settings.render_routes and path in RENDER_PATHS else None

    async def _json_body(
        self, headers: dict[bytes, bytes], receive: Receive, send: Send
    ) -> tuple[bytes, dict[str, Any]] | None:
        """The request's body and its JSON object; None when the client left or was answered (413, or a 400 for a
        body that is not a JSON object)."""
        try:
            body = await read_body(receive, headers, self._body_limits)
        except ClientDisconnected:
            return None
        except BodyTooLarge:
            await send_error(send, 413, f"the request body is larger than {self.settings.max_body_bytes} bytes")
            return None
        request = parse_body(body)
        if isinstance(request, Refusal):
            await _refuse(send, request)
            return None
        return body, request

    async def _render(self, path: str, headers: dict[bytes, bytes], receive: Receive, send: Send) -> None:
        """Forward a render request (the prompt as token ids; the router's cache_aware policy asks every pod) as a
        lookup: a JSON body within MAX_BODY_BYTES, the engine's answer within the lookups' bounds. Nothing is
        generated, so it takes no admission slot and counts no usage."""
        read = await self._json_body(headers, receive, send)
        if read is None:
            return
        answer = await self._lookup(path, send, body=read[0])
        if answer is not None:
            await _send_whole(send, *answer)

    async def _lookup(
        self, path: str, send: Send, *, body: bytes | None = None
    ) -> tuple[int, Mapping[str, str], bytes] | None:
        """The engine's answer to GET `path`, or to POST `body` there (status, headers, body), or None when the
        gateway answered instead: a
        429 past MAX_CONCURRENT_LOOKUPS, a 503 past LOOKUP_TIMEOUT_S or without an engine, a 502 for an answer
        over MAX_ENGINE_BODY_BYTES. Unlike generations, GETs pass no admission: without their own bound, a flood of
        them against a stuck engine held an engine connection and a client connection each, until the gateway
        ran out of open files."""
        limit, timeout_s = self.lookups.limit, self.settings.lookup_timeout_s
        if not self.lookups.try_take():
            log.warning("engine lookup refused", extra={"path": path, "in_flight": limit})
            message = f"{limit} lookups are already waiting on the engine here; retry shortly"
            await send_error(send, 429, message, headers=self._retry_after)
            return None
        try:
            async with asyncio.timeout(timeout_s):
                max_bytes = self.settings.max_engine_body_bytes
                if body is None:
                    return await get_within(self.http, path, max_bytes)
                return await post_within(self.http, path, body, max_bytes)
        except AnswerTooLarge as exc:
            log.warning("engine answer too large", extra={"route": path, "detail": str(exc)})
            await send_error(send, 502, f"{exc}: the gateway stopped reading it")
            return None
        except EngineError as exc:
            message = f"the engine is not reachable ({type(exc).__name__}); retry shortly"
            await send_error(send, 503, message, headers=self._retry_after)
            return None
        except TimeoutError:
            log.warning("engine lookup timed out", extra={"path": path, "timeout_s": timeout_s})
            message = f"the engine did not answer within {timeout_s:g} s ({path}); retry shortly"
            await send_error(send, 503, message, headers=self._retry_after)
            return None
        finally:
            self.lookups.give_back()

    async def _generation(
        self,
        path: str,
        headers: dict[bytes, bytes],
        receive: Receive,
        send: Send,
        write_nowait: BodyNowait | None,
    ) -> None:
        retry_after = [(b"retry-after", str(self.settings.retry_after_s).encode())]
        read = await self._json_body(headers, receive, send)
        if read is None:
            return
        body, request = read
        refusal = (
            check_request_id(headers)
            or check_fields(request)
            or check_structured_outputs(request, self.settings.structured_outputs)
        )
        limit = self.admission.limit
        wanted = sequences(path, request, limit) if refusal is None else 0
        if wanted > limit:
            message = f"this request asks for {wanted} sequences (prompts x n or best_of); at most {limit} run here"
            refusal = Refusal(400, message, "n")
        if refusal is not None:
            await _refuse(send, refusal)
            return
        record = RequestRecord(
            route=path,
            model=_text(request.get("model")),
            stream=request.get("stream") is True,
            request_id=headers[REQUEST_ID_HEADER].decode("ascii") if REQUEST_ID_HEADER in headers else None,
        )
        if self.admission.draining:
            record.status, record.outcome = 503, "refused"
            await send_error(send, 503, "this server is shutting down; retry", headers=retry_after)
            self._finish(record)
            return
        ticket = self.admission.try_admit(wanted)
        if ticket is None:
            record.status, record.outcome = 429, "refused"
            await send_error(
                send,
                429,
                f"{self.admission.in_flight} of {limit} sequences are already in flight here; retry shortly",
                headers=retry_after,
            )
            self._finish(record)
            return
        reply = Reply(write_nowait=write_nowait)
        delivery_wait_s = self.settings.delivery_wait_s

        async def send_then_release(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
                return
            more = message.get("more_body", False)
            if reply.last_event or not more:
                # The slot is free once the answer's last event is handed over (its sequences are done in the
                # engine), before uvicorn can start this connection's next request or the client can open another;
                # the clock stops then too (a client may leave on `[DONE]`).
                self.admission.release(ticket)
                if record.ended is None:
                    record.ended = time.monotonic()
            if not more:  # the last piece: WRITE_TIMEOUT_S bounds its wait
                await send(message)
                return
            # The server's send waits only while the client's buffers are full: the time spent in it is the time
            # the client held the answer back (the writes without a wait cost no clock). One wait can last long (a
            # slow reader drains a full buffer slowly), so it is cut when the budget runs out.
            started = time.monotonic()
            try:
                async with asyncio.timeout(delivery_wait_s - reply.waited_s):
                    await send(message)
            except TimeoutError:
                raise DeliveryTooSlow from None
            finally:
                reply.waited_s += time.monotonic() - started

        try:
            await self._run(path, request, body, headers, record, ticket, reply, receive, send_then_release)
        finally:
            self.admission.release(ticket)
            self._finish(record)

    def _finish(self, record: RequestRecord) -> None:
        """Stop the ended request's clock, unless its last event stopped it; it is logged and counted
        FINISHED_WRITE_DELAY_S later."""
        if record.ended is None:
            record.ended = time.monotonic()
        self._finished.append(record)
        if self._finished_timer is None:
            self._finished_timer = asyncio.get_running_loop().call_later(FINISHED_WRITE_DELAY_S, self._write_finished)

    def _write_finished(self) -> None:
        """Log each ended request and count it in the metrics."""
        if self._finished_timer is not None:
            self._finished_timer.cancel()
            self._finished_timer = None
        records, self._finished = self._finished, []
        with batched_log_lines():  # streams that end together: one write of their lines, not one each
            for record in records:
                info_fields(log, "request", record.log_fields())
                self.metrics.request_finished(record)

    async def _run(
        self,
        path: str,
        request: dict[str, Any],
        body: bytes,
        headers: dict[bytes, bytes],
        record: RequestRecord,
        ticket: Ticket,
        reply: Reply,
        receive: Receive,
        send: Send,
    ) -> None:
        """Forward the generation, racing it against the client's disconnect and the drain's cut."""
        # A Responses stream always ends with its usage, which its client gets: nothing to ask for or drop.
        client_wants_usage = _asks_for_usage(request) or path not in STREAM_OPTIONS_PATHS
        if record.stream and not client_wants_usage:
            # Ask vLLM for the usage chunk anyway, to count tokens; EventStream drops it for this client.
            body = with_usage_asked(request, body)
        upstream_headers = {"content-type": "application/json"}
        upstream_headers.update(
            {name.decode(): headers[name].decode("latin-1") for name in FORWARDED_REQUEST_HEADERS if name in headers}
        )
        forward = self._forward(
            path, body, upstream_headers, record, reply, send, client_wants_usage=client_wants_usage
        )
        try:
            # A cancelled forwarding leaves its `async with`, which closes the upstream connection: vLLM aborts.
            await unless_disconnected(receive, forward, cut=ticket.cut)
        except (ClientDisconnected, WorkCut) as stopped:
            if reply.finished:  # the client read the whole answer and left before the upstream closed
                record.outcome = "completed" if (record.status or 500) < 400 else "rejected"
            elif isinstance(stopped, ClientDisconnected):
                record.outcome = "client_gone"
            else:
                record.outcome = "cut"
                await self._answer_cut(record, reply, send)
        except DeliveryTooSlow:
            await self._answer_slow_client(record, reply, send)

    async def _answer_slow_client(self, record: RequestRecord, reply: Reply, send: Send) -> None:
        """End a stream whose client has held it back DELIVERY_WAIT_S in all (the engine's side is closed, so vLLM
        stops it if it still runs): an error event, handed over with the slots, is its last."""
        limit_s = self.settings.delivery_wait_s
        record.outcome = "slow_client"
        log.warning(
            "client read too slowly; its stream was cut",
            extra={"route": record.route, "waited_s": round(reply.waited_s, 1), "delivery_wait_s": limit_s},
        )
        message = (
            f"the client read its answer too slowly: the stream waited {limit_s:g} s in all for it to read "
            "(DELIVERY_WAIT_S) and was stopped"
        )
        await send({"type": "http.response.body", "body": sse_error_event(408, message), "more_body": False})

    async def _answer_cut(self, record: RequestRecord, reply: Reply, send: Send) -> None:
        """Tell the client that the drain cut its generation: an error event ends a stream, else a 503."""
        message = "the server shut down before the generation finished; retry"
        if reply.streaming:
            await send({"type": "http.response.body", "body": sse_error_event(503, message), "more_body": False})
        elif not reply.started:
            record.status = 503
            await send_error(send, 503, message)

    async def _forward(
        self,
        path: str,
        body: bytes,
        headers: dict[str, str],
        record: RequestRecord,
        reply: Reply,
        send: Send,
        *,
        client_wants_usage: bool,
    ) -> None:
        """Send the request to vLLM and its answer to the client: a stream event by event, else whole (within
        REQUEST_TIMEOUT_S, if set: leaving the `async with` closes the connection, and vLLM aborts the request)."""
        deadline = self.settings.request_timeout_s
        exchange = self._exchange(path, body, headers, record, reply, send, client_wants_usage=client_wants_usage)
        if record.stream or not deadline:
            await exchange  # no deadline: no timer to arm and cancel on every request's path
            return
        try:
            async with asyncio.timeout(deadline):
                await exchange
        except TimeoutError:
            record.outcome, record.status = "timed_out", 504
            if not reply.started:
                await send_error(
                    send,
                    504,
                    f"the answer took longer than {deadline:g} s and was stopped; ask for stream=true (or fewer "
                    "max_tokens) for long answers",
                )

    async def _exchange(
        self,
        path: str,
        body: bytes,
        headers: dict[str, str],
        record: RequestRecord,
        reply: Reply,
        send: Send,
        *,
        client_wants_usage: bool,
    ) -> None:
        try:
            response = await self._open_upstream(path, body, headers)
            try:  # a cancelled forwarding closes the response, and with it the connection: vLLM aborts
                record.status = status = response.status
                if status == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
                    await self._stream(response, record, reply, send, client_wants_usage=client_wants_usage)
                else:
                    content = await read_within(response, self.settings.max_engine_body_bytes)
                    response.close()  # no-op once read: the connection went back to the pool at the body's end
                    if status == 200:
                        record.take_usage(_json_field(content, "usage"))
                    reply.started = True
                    if is_unserved(status, content):  # this engine's model does not serve `path`
                        record.status = status = 404
                        await _send_whole(send, status, _JSON, unserved_body(path))
                    else:
                        await _send_whole(send, status, response.headers, content)
                    reply.finished = True
                record.outcome = "completed" if status < 400 else "rejected"
            finally:
                response.close()  # an unfinished answer closes its connection: vLLM aborts the request
        except (EngineError, AnswerTooLarge) as exc:
            record.outcome = "upstream_error"
            if isinstance(exc, AnswerTooLarge):
                log.warning("engine answer too large", extra={"route": path, "detail": str(exc)})
                message = f"{exc}: the gateway stopped reading it"
            else:
                log.warning("engine request failed", extra=_cause(exc))
                message = f"the engine is not reachable ({type(exc).__name__}); retry shortly"
            if reply.streaming:
                await send({"type": "http.response.body", "body": sse_error_event(502, message), "more_body": False})
            elif not reply.started:
                # Nothing sent (no connection, or none free in time): the engine is busy or restarting, and a retry
                # may find it (503, Retry-After). A connection that broke mid-request is the engine's failure (502).
                record.status = 503 if isinstance(exc, CONNECT_FAILURES) else 502
                retry_after = [(b"retry-after", str(self.settings.retry_after_s).encode())]
                await send_error(send, record.status, message, headers=retry_after if record.status == 503 else [])

    async def _open_upstream(self, path: str, body: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        """vLLM's response to the request, its body still to read. A connect that fails is tried once more: nothing
        was sent, and a single lost SYN (a full accept queue on a busy engine) costs a retransmit of 1 s or more."""
        try:
            return await self.http.request("POST", path, body, headers)
        except CONNECT_FAILURES as exc:
            log.warning("engine connect failed; trying once more", extra=_cause(exc))
            return await self.http.request("POST", path, body, headers)

    async def _stream(
        self,
        response: aiohttp.ClientResponse,
        record: RequestRecord,
        reply: Reply,
        send: Send,
        *,
        client_wants_usage: bool,
    ) -> None:
        """Forward a stream: each piece is all the body that has come since the last (a reader that lags takes
        several events at once), its whole events written at once where the client's socket takes them, else
        through `send`, which waits under the delivery bound (and meanwhile the engine's socket is not read)."""
        events = EventStream(
            record,
            client_wants_usage=client_wants_usage,
            responses_api=record.route == RESPONSES_PATH,
            max_event_bytes=self.settings.max_engine_event_bytes,
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    *_response_headers(response.headers),
                    (b"cache-control", b"no-cache"),
                    # Proxies in front (nginx and the like) must not buffer the stream either.
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        reply.started = reply.streaming = True
        write_nowait = reply.write_nowait
        pieces = response.content.iter_any()
        out = b""
        piece = await self._first_piece(pieces, send)
        while piece is not None:
            out = events.feed(piece)
            if events.done:
                out = await self._after_last_event(pieces, out, reply, send)
                break
            if out and (write_nowait is None or not write_nowait(out)):
                await send({"type": "http.response.body", "body": out, "more_body": True})
            out = b""
            piece = await anext(pieces, None)
        response.close()  # no-op at the body's end (the connection is back in the pool); else the connection closes
        # Every upstream event is forwarded: a client that leaves now (on `[DONE]`) got the whole answer.
        reply.finished = True
        await send({"type": "http.response.body", "body": out + events.rest(), "more_body": False})

    async def _first_piece(self, pieces: AsyncIterator[bytes], send: Send) -> bytes | None:
        """The stream's first piece (None: the body ended without one); a heartbeat goes out every HEARTBEAT_S while
        none has come (a request waiting in the engine's queue sends nothing for as long as it waits). A wait that
        times out loses nothing: what comes later waits in the response's buffer."""
        while True:
            try:
                async with asyncio.timeout(self.settings.heartbeat_s):
                    return await anext(pieces, None)
            except TimeoutError:
                await send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})

    async def _after_last_event(self, pieces: AsyncIterator[bytes], last: bytes, reply: Reply, send: Send) -> bytes:
        """Wait for the end of the engine's body after the stream's last event (`last`), so the connection goes back
        to the pool; what is left to send with the response's end. vLLM ends its body right after its `[DONE]`
        (usually in the same read): an end that comes within LAST_EVENT_WAIT_S goes out with `last`, in one write.
        Otherwise `last` goes out now, handing over the slots and stopping the clock, and the end is waited for
        (BODY_END_WAIT_S at most)."""
        try:
            async with asyncio.timeout(LAST_EVENT_WAIT_S):
                await _read_to_end(pieces)
            return last
        except TimeoutError:
            pass
        reply.last_event = True
        await send({"type": "http.response.body", "body": last, "more_body": True})
        reply.finished = True  # the client has its whole answer, whether or not it waits for the end
        with suppress(TimeoutError):
            async with asyncio.timeout(BODY_END_WAIT_S):
                await _read_to_end(pieces)
        return b""


async def _read_to_end(pieces: AsyncIterator[bytes]) -> None:
    """Read a stream's body after its last event to its end, dropping what comes, so its connection can serve
    another request. An engine that sends more than AFTER_LAST_EVENT_BYTES, or breaks the connection, loses it (the
    response is closed unfinished); the client's answer is whole either way."""
    dropped = 0
    with suppress(EngineError):
        async for piece in pieces:
            dropped += len(piece)
            if dropped > AFTER_LAST_EVENT_BYTES:
                return


def _retrieve_outcome(check: asyncio.Future[int]) -> None:
    """Mark a health check's failure as seen (its probes may all have gone): no "never retrieved" log line."""
    if not check.cancelled():
        check.exception()


def _model_path_method(path: str) -> str | None:
    """GET for a `/v1/models/{id}` path with an id."""
    return "GET" if path.startswith(MODEL_PATH_PREFIX) and len(path) > len(MODEL_PATH_PREFIX) else None


def _cause(exc: Exception) -> dict[str, str]:
    """An upstream failure as log fields: its class and what it says."""
    return {"cause": type(exc).__name__, "detail": str(exc) or repr(exc.__cause__ or exc.__context__)}


def _asks_for_usage(request: dict[str, Any]) -> bool:
    options = request.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _json_field(content: bytes, name: str) -> Any:
    try:
        payload = json.loads(content)
    except ValueError:
        return None
    return payload.get(name) if isinstance(payload, dict) else None


def _response_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), headers[name].encode("latin-1")) for name in FORWARDED_RESPONSE_HEADERS if name in headers]


async def _send_whole(send: Send, status: int, headers: Mapping[str, str], content: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*_response_headers(headers), (b"content-length", str(len(content)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": content})


async def _refuse(send: Send, refusal: Refusal) -> None:
    await send_error(send, refusal.status, refusal.message, param=refusal.param)


_JSON = {"content-type": "application/json"}


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    await _send_whole(send, status, _JSON, json.dumps(payload).encode())
