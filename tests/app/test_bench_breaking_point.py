"""The breaking-point ramp against a fake service whose latency grows with concurrency."""

from __future__ import annotations

import argparse
import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from xml.etree import ElementTree

import pytest

from app.bench import breaking_point
from app.bench.breaking_point import LevelResult, concurrency_levels
from app.bench.plots import BREAKING_POINT_SWEEP
from common.bench.cost import cost_per_1000_images
from tests.support.fake_server import FakeServer, QuietHandler

PNG = b"\x89PNG\r\n\x1a\n"  # only the signature: the client never decodes the image


@contextmanager
def fake_service(base_ms: float, per_extra_client_ms: float, queue_limit: int = 1000) -> Iterator[str]:
    """A loopback HTTP server: latency = base + per extra request in flight; 429 past queue_limit."""
    lock = threading.Lock()
    state = {"active": 0}

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real service behind uvicorn

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state["active"] += 1
                active = state["active"]
            try:
                if active > queue_limit:
                    self._reply(429, b"queue full", "text/plain")
                    return
                time.sleep((base_ms + per_extra_client_ms * (active - 1)) / 1000.0)
                self._reply(200, PNG, "image/png")
            finally:
                with lock:
                    state["active"] -= 1

        def do_GET(self) -> None:
            self._reply(200, b'{"backend": "fake"}', "application/json")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with FakeServer(Handler) as server:
        yield server.url


def _args(url: str, tmp_path, **overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    breaking_point.add_arguments(parser)
    args = parser.parse_args(["--url", url, "--level-seconds", "0.5", "--max-concurrency", "16"])
    args.results_file = tmp_path / "benchmarks.md"
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def test_levels_double_up_to_the_maximum():
    assert concurrency_levels(1) == [1]
    assert concurrency_levels(10) == [1, 2, 4, 8, 10]
    assert concurrency_levels(16) == [1, 2, 4, 8, 16]


def test_cost_per_1000_images():
    assert cost_per_1000_images(3.6, 60.0) == pytest.approx(1.0)  # 3,600 images an hour
    assert math.isnan(cost_per_1000_images(3.6, 0.0))
    with pytest.raises(ValueError):
        cost_per_1000_images(-1.0, 60.0)


def test_a_level_is_within_the_slo_only_with_completions_low_p90_and_few_errors():
    fast = LevelResult(2, completed=99, rejected=1, failed=0, elapsed_s=60.0, latencies_ms=(100.0,) * 99)
    assert fast.per_minute == pytest.approx(99.0)
    assert fast.within(slo_ms=150.0, max_error_share=0.02)
    assert not fast.within(slo_ms=50.0, max_error_share=0.02)
    assert not fast.within(slo_ms=150.0, max_error_share=0.001)
    assert not LevelResult(1, 0, 0, 0, 1.0, ()).within(slo_ms=150.0, max_error_share=1.0)


def test_the_ramp_stops_at_the_first_level_past_the_slo(tmp_path, capsys):
    # Latency 100, 200, 400, 800 ms at 1, 2, 4, 8 clients: an SLO of 600 ms holds up to 4 clients,
    # with margins wide enough for a busy test machine's scheduling delays.
    with fake_service(base_ms=100.0, per_extra_client_ms=100.0) as url:
        args = _args(url, tmp_path, slo_ms=600.0, price_per_hour=3.6, level_seconds=1.0)
        assert breaking_point.run(args) == 0
    out = capsys.readouterr().out
    assert "concurrency 8:" in out
    assert "concurrency 16:" not in out
    assert "Sustained: **" in out and "at 4 concurrent clients" in out
    assert "Cost per 1,000 images at 3.6/hour" in out
    assert '{"backend": "fake"}' in args.results_file.read_text()
    # The plot beside the results: one line, a point per level (1, 2, 4, 8 clients) at its table's figures.
    plot = ElementTree.parse(BREAKING_POINT_SWEEP.path_beside(args.results_file)).getroot()  # noqa: S314  # ours
    points = plot.findall(".//{http://www.w3.org/2000/svg}circle")
    assert [point.get("data-label") for point in points] == ["1", "2", "4", "8"]
    table = [line.split("|") for line in args.results_file.read_text().splitlines() if line.startswith("|  ")]
    assert [float(point.get("data-x")) for point in points] == [float(row[6]) for row in table]


def test_rejections_end_the_ramp(tmp_path, capsys):
    with fake_service(base_ms=30.0, per_extra_client_ms=0.0, queue_limit=2) as url:
        args = _args(url, tmp_path, slo_ms=1000.0)
        assert breaking_point.run(args) == 0
    out = capsys.readouterr().out
    assert "concurrency 4:" in out and "concurrency 8:" not in out
    assert "at 2 concurrent clients" in out


def test_an_unreachable_service_meets_no_slo(tmp_path, capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again before the ramp starts
    args = _args(url, tmp_path, slo_ms=1000.0, level_seconds=0.2, results_file=None)
    assert breaking_point.run(args) == 1
    assert "No level met the SLO" in capsys.readouterr().out


@pytest.mark.server  # builds the tiny Flux model and serves it
def test_a_model_id_is_served_in_process_and_its_family_written_under_its_own_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MODEL_CACHE_DIR", str(tmp_path / "models"))
    args = _args(
        "http://unused", tmp_path, model_id="builtin:tiny-flux", slo_ms=60_000.0, level_seconds=1.0, max_concurrency=2
    )
    assert breaking_point.run(args) == 0
    written = args.results_file.read_text()
    assert "<!-- bench:breaking-point builtin:tiny-flux cpu 60000ms -->" in written
    assert '"name": "flux"' in written  # /v1/info's family, in the section's service line
    assert "concurrency 2:" in capsys.readouterr().out
