"""The serving benchmark's pieces: mode dispatch, the HTTP measurement and the ratio table."""

from __future__ import annotations

import asyncio

import pytest

from app.bench import __main__ as bench_cli
from app.bench.serving import Row, measure_http, render
from tests.app.live_server import LiveServer


def test_serving_is_the_default_mode(monkeypatch):
    seen = []
    monkeypatch.setattr(bench_cli.serving, "run", lambda args: seen.append(args) or 0)
    assert bench_cli.main(["--concurrency", "2", "3"]) == 0
    assert seen[0].mode == "serving" and seen[0].concurrency == [2, 3]


def test_help_lists_the_modes(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_cli.main(["--help"])
    assert exit_info.value.code == 0
    assert "serving" in capsys.readouterr().out


def test_http_measurement_against_the_live_service(live_service: LiveServer):
    row = asyncio.run(measure_http(live_service.url, concurrency=2, per_client=2, steps=2, size=64))
    assert row.failures == 0
    assert row.images == 4 and len(row.latencies_s) == 4


def test_table_shows_ratios_against_the_bare_call():
    bare = Row("bare pipeline, batch 1", 1, [0.1, 0.1], images=2, wall_s=0.2)
    http = Row("HTTP, 4 client(s)", 4, [0.2, 0.2], images=8, wall_s=0.4)
    lines = render([bare, http], bare).splitlines()
    assert "p50 / bare" in lines[0]
    cells = [c.strip() for c in lines[3].split("|")[1:-1]]
    assert cells[1] == "200" and cells[5] == "2" and cells[6] == "2"
