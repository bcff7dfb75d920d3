"""The gate as a proxy on the shared bounded server: each client's fields and only its own go through, answers come
back as the pool sent them, long streams leave room for other requests, a pool's failure is a JSON error, and a
SIGTERM with a stream open stops the gate within its grace period and still publishes the demand it counted."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager

import boto3
import httpx
import pytest
import uvicorn
from moto.server import ThreadedMotoServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.bench.inprocess import serve_in_thread
from common import metric_names
from common.server_process import free_port, serve_process
from starting_gate.settings import load_settings
from tests.starting_gate.gate_server import serving_gate

UNIT = {"DeploymentUnit": "sd-gpu", "Accelerator": "nvidia"}


class Pool:
    """A stand-in pool: sets two cookies, echoes the fields it got, and holds streams open until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.streams_open = 0

    def app(self) -> Starlette:
        async def cookies(request: Request) -> Response:
            response = Response("ok")
            response.set_cookie("sd_session", "token-of-user-a")
            response.set_cookie("theme", "dark")
            response.headers.append("x-repeated", "one")
            response.headers.append("x-repeated", "two")
            return response

        async def echo(request: Request) -> JSONResponse:
            return JSONResponse({"cookie": request.headers.get("cookie"), "host": request.headers.get("host")})

        async def stream(request: Request) -> StreamingResponse:
            async def events() -> AsyncIterator[bytes]:
                self.streams_open += 1
                try:
                    yield b"data: open\n\n"
                    while not self.release.is_set():
                        await asyncio.sleep(0.05)
                    yield b"data: done\n\n"
                finally:
                    self.streams_open -= 1

            return StreamingResponse(events(), media_type="text/event-stream")

        return Starlette(routes=[Route("/cookies", cookies), Route("/echo", echo), Route("/stream", stream)])


@pytest.fixture
def pool() -> Iterator[tuple[Pool, str]]:
    stand_in = Pool()
    try:
        with serve_in_thread(stand_in.app(), load_settings(upstream_url="http://unused")) as url:
            yield stand_in, url
    finally:
        stand_in.release.set()


def test_answer_fields_come_back_as_sent_and_no_cookie_is_kept(pool):
    _, url = pool
    with serving_gate(upstream_url=url) as gate:
        answer = httpx.get(gate.url + "/cookies")
        assert answer.headers.get_list("set-cookie") == [
            "sd_session=token-of-user-a; Path=/; SameSite=lax",
            "theme=dark; Path=/; SameSite=lax",
        ]
        assert answer.headers.get_list("x-repeated") == ["one", "two"]
        # The next client sends no cookie, and the pool gets none.
        assert httpx.get(gate.url + "/echo").json()["cookie"] is None
        own = httpx.get(gate.url + "/echo", headers={"cookie": "sd_session=b", "host": "sd.example.com"}).json()
        assert own == {"cookie": "sd_session=b", "host": "sd.example.com"}


def test_long_streams_leave_room_for_other_requests(pool):
    stand_in, url = pool
    streams = 110  # more than httpx's default pool of 100 connections, which such streams used to exhaust
    with serving_gate(upstream_url=url, max_connections=128, upstream_pool_timeout_s=0.5) as gate, ExitStack() as open_:
        clients = [open_.enter_context(httpx.Client(base_url=gate.url, timeout=30)) for _ in range(streams)]
        readers = [open_.enter_context(client.stream("GET", "/stream")).iter_raw() for client in clients]
        for reader in readers:  # kept: a reader let go of closes its stream
            assert next(reader).startswith(b"data: open")
        assert stand_in.streams_open == streams
        assert httpx.get(gate.url + "/echo", timeout=10).status_code == 200
        stand_in.release.set()


def test_a_pool_that_closes_early_gets_a_json_502():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def close_each() -> None:
            for _ in range(2):
                conn, _ = listener.accept()
                conn.recv(65536)
                conn.close()

        threading.Thread(target=close_each, daemon=True).start()
        with serving_gate(upstream_url=f"http://127.0.0.1:{listener.getsockname()[1]}") as gate:
            answer = httpx.post(gate.url + "/v1/generate", json={"prompt": "a fox"}, timeout=10)
            assert answer.status_code == 502
            assert "closed the connection" in answer.json()["error"]
            openai = httpx.post(gate.url + "/v1/images/generations", json={"prompt": "a fox"}, timeout=10)
            assert openai.status_code == 502 and openai.json()["error"]["type"] == "server_error"


def test_the_gate_bounds_heads_and_silent_connections():
    with serving_gate(header_timeout_s=1.0) as gate:
        huge = httpx.get(gate.url + "/", headers={"x-big": "a" * (4 * 1024 * 1024)}, timeout=10)
        assert huge.status_code == 431 and "larger than" in huge.json()["error"]
        host, port = gate.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(1) == b""  # closed by the gate, not by the test's timeout
            assert time.monotonic() - started < 8
        for head in (
            b"GET / HTTP/1.1\r\n\r\n",  # no Host
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        ):
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(head)
                assert raw.recv(65536).startswith(b"HTTP/1.1 400 ")
        assert httpx.get(gate.url + "/health", timeout=10).status_code == 200


@contextmanager
def moto_cloudwatch() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.mark.process
def test_sigterm_with_a_stream_open_stops_within_the_grace_and_publishes_the_demand(tmp_path):
    grace_s = 3
    pool_port = free_port()
    stand_in = Pool()
    with moto_cloudwatch() as endpoint:
        env = {
            "UPSTREAM_URL": f"http://127.0.0.1:{pool_port}",
            "DEMAND_UNITS": '[{"DeploymentUnit":"sd-gpu","Accelerator":"nvidia"}]',
            "SHUTDOWN_GRACE_S": str(grace_s),
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "PYTHONPATH": os.getcwd(),
        }
        with serve_process([sys.executable, "-m", "starting_gate"], env=env, log=tmp_path / "gate.log") as gate:
            # Cold: the pool's port is closed. A generation counts as demand.
            cold = httpx.post(gate.url + "/v1/generate", json={"prompt": "a fox"}, timeout=10)
            assert cold.status_code == 503
            config = uvicorn.Config(stand_in.app(), host="127.0.0.1", port=pool_port, log_config=None)
            pool_server = uvicorn.Server(config)
            threading.Thread(target=pool_server.run, daemon=True).start()
            try:
                deadline = time.monotonic() + 30
                while not pool_server.started:  # a request before the pool listens would get the cold answer
                    assert time.monotonic() < deadline, "the stand-in pool did not start"
                    time.sleep(0.05)
                with httpx.Client(base_url=gate.url, timeout=30) as client, client.stream("GET", "/stream") as stream:
                    reader = stream.iter_raw()
                    assert next(reader).startswith(b"data: open")
                    started = time.monotonic()
                    gate.process.send_signal(signal.SIGTERM)
                    status = gate.process.wait(timeout=30)
                    took = time.monotonic() - started
            finally:
                stand_in.release.set()
                pool_server.should_exit = True
            assert status == 0, gate.tail()
            assert took < grace_s + 5, f"stopped after {took:.1f} s"
        cloudwatch = boto3.client(
            "cloudwatch",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        now = dt.datetime.now(dt.UTC)
        stats = cloudwatch.get_metric_statistics(
            Namespace=metric_names.NAMESPACE,
            MetricName=metric_names.REQUESTS.name,
            Dimensions=[{"Name": k, "Value": v} for k, v in UNIT.items()],
            StartTime=now - dt.timedelta(minutes=5),
            EndTime=now + dt.timedelta(minutes=1),
            Period=60,
            Statistics=["Sum"],
        )
        assert sum(p["Sum"] for p in stats["Datapoints"]) == 1
