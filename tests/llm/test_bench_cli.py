"""`python -m llm_bench` as the benchmark Job runs it: the token file read for every request (so a renewed Secret
takes effect mid-run), the figure for llmRequestsPerMinute<Acc> and its cost, and one-line errors for a bad
command line or a refusing gateway. Nothing is timed here."""

from __future__ import annotations

import argparse
import math
from xml.etree import ElementTree

import httpx
import pytest

from llm_bench import __main__ as bench
from llm_bench.plots import LLM_SWEEP
from llm_bench.token import TokenFile
from tests.llm.stack import run_gateway, run_standin
from tests.support.fake_user_pool import API_CLIENT, FakeUserPool


def test_the_token_file_is_read_again_for_each_request(tmp_path):
    token = tmp_path / "token"
    token.write_text("first\n", encoding="utf-8")
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(record), auth=TokenFile(token)) as client:
        client.get("http://gateway/v1/models")
        token.write_text("renewed", encoding="utf-8")  # the kubelet rewrites the Secret volume's file
        client.get("http://gateway/v1/models")
    assert seen == ["Bearer first", "Bearer renewed"]


def test_a_missing_or_empty_token_file_is_named(tmp_path):
    with pytest.raises(RuntimeError, match=r"cannot read the token file .*/absent"):
        TokenFile(tmp_path / "absent").token()
    (tmp_path / "empty").write_text("  \n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="is empty"):
        TokenFile(tmp_path / "empty").token()


def sweep_row(concurrency: int, tokens_per_s: float, per_min: float, goodput: float, cost: float) -> list[object]:
    # concurrency, completed, failed, 4 latencies, output tok/s, requests/min, goodput req/min, USD / M tokens
    return [concurrency, 8, 0, 1.0, 2.0, 3.0, 4.0, tokens_per_s, per_min, goodput, cost]


def test_the_figure_for_the_routing_setting_is_the_best_point_where_nine_in_ten_meet_the_slo():
    args = argparse.Namespace(per_replica_setting="llmRequestsPerMinuteNeuron", price_per_hour=0.76)
    rows = [
        sweep_row(1, 100.0, 20.0, 20.0, 2.11),
        sweep_row(4, 380.0, 72.0, 70.5, 0.56),
        # More goodput, but only 6 in 10 within the SLO: the TTFT p90 alarm would fire here.
        sweep_row(8, 600.0, 130.0, 78.0, 0.35),
    ]
    line = bench.at_the_slo(args, rows)
    assert "70.5 requests/min within it (`llmRequestsPerMinuteNeuron`), at concurrency 4, 98% of requests" in line
    assert "380.0 output tok/s, USD 0.56 per million output tokens at USD 0.76/h" in line


def test_no_point_within_the_slo_says_so():
    args = argparse.Namespace(per_replica_setting=None, price_per_hour=None)
    rows = [sweep_row(1, 10.0, 5.0, 0.0, math.nan), sweep_row(2, 20.0, 9.0, math.nan, math.nan)]
    assert bench.at_the_slo(args, rows) == "**At the SLO:** no sweep point had 90% of its requests within the SLO."


def test_cost_per_million_output_tokens():
    args = argparse.Namespace(price_per_hour=1.006)
    assert bench.cost_per_million(args, 1000.0) == pytest.approx(1.006 / 3.6)  # USD 0.28 at 1,000 tok/s
    assert math.isnan(bench.cost_per_million(args, 0.0))
    assert math.isnan(bench.cost_per_million(argparse.Namespace(price_per_hour=None), 1000.0))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give --local, or --gateway-url"),
        (["--gateway-url=http://g", "--sweep-target=engine"], "--sweep-target engine needs --engine-url"),
        (["--gateway-url=http://g", "--price-per-hour=0"], "--price-per-hour must be positive"),
    ],
)
def test_a_bad_command_line_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        bench.parse_args(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_refusing_gateway_stops_the_run_in_one_line_with_its_message(tmp_path, capsys):
    # A real gateway requiring sign-in (no engine behind it: the refusal comes first) and a token it does not trust.
    pool = FakeUserPool()
    token = tmp_path / "token"
    token.write_text("not-a-token", encoding="utf-8")
    with (
        pool.serving(),
        run_gateway(
            "http://127.0.0.1:9",
            tmp_path,
            {"AUTH": "cognito", "AUTH_ISSUER": pool.issuer, "AUTH_CLIENT_IDS": API_CLIENT},
        ) as gw,
    ):
        code = bench.main([f"--gateway-url={gw.url}", f"--token-file={token}", "--model=m", "--sweep="])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("llm_bench: GET ") and "/v1/models answered 401: " in line


def test_a_gateway_that_never_answers_is_waited_for_then_named(capsys):
    # Nothing listens on port 9: the start-up wait (--wait-s) gives up and says on what.
    code = bench.main(["--gateway-url=http://127.0.0.1:9", "--model=m", "--sweep=", "--wait-s=0"])
    assert code == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("llm_bench: RuntimeError: http://127.0.0.1:9 did not answer within 0 s: ConnectError")


def test_a_run_with_a_results_file_draws_its_sweep_beside_it(tmp_path):
    """The whole benchmark through a gateway in front of the full-speed stand-in: its section and, beside the file,
    the plot with one point per sweep concurrency at the table's TTFT and tokens/s."""
    results = tmp_path / "benchmarks.md"
    with run_standin() as (engine_url, _), run_gateway(engine_url, tmp_path) as gateway:
        argv = ["--gateway-url", gateway.url, "--model", "standin", "--input-tokens", "4", "--output-tokens", "4"]
        argv += ["--concurrency", "2", "--max-num-seqs", "2", "--overhead-concurrency", "", "--sweep", "1,2"]
        argv += [
            "--sweep-client",
            "builtin",
            "--sweep-prompts",
            "4",
            "--device",
            "test",
            "--results-file",
            str(results),
        ]
        assert bench.main(argv) == 0
    sweep = [row.split(" | ") for row in results.read_text(encoding="utf-8").splitlines() if row.startswith("| 1 | 4")]
    sweep += [row.split(" | ") for row in results.read_text(encoding="utf-8").splitlines() if row.startswith("| 2 | 4")]
    svg = ElementTree.parse(LLM_SWEEP.path_beside(results)).getroot()  # noqa: S314  # our own output
    points = svg.findall(".//{http://www.w3.org/2000/svg}circle")
    assert [point.get("data-label") for point in points] == ["1", "2"]
    # TTFT p50 (ms) is the 4th column, output tok/s the 8th (llm_bench/__main__.py's sweep table).
    assert [float(point.get("data-x")) for point in points] == [float(row[3].replace(",", "")) for row in sweep]
    assert [float(point.get("data-y")) for point in points] == [float(row[7].replace(",", "")) for row in sweep]
