"""The LLM benchmark's arithmetic on canned timings (llm_bench/report.py): nothing is timed here."""

from __future__ import annotations

import math

import pytest

from llm_bench.report import Slo, Timing, change_pct, percentile, summarize

SLO = Slo(ttft_ms=500, tpot_ms=50)


def streamed(start: float, ttft: float, gap: float, tokens: int, input_tokens: int = 100) -> Timing:
    """A request whose tokens arrived `gap` apart after its first one."""
    times = [start + ttft + i * gap for i in range(tokens)]
    return Timing(
        start=start,
        end=times[-1],
        status=200,
        ttft_s=ttft,
        token_times=times,
        input_tokens=input_tokens,
        output_tokens=tokens,
    )


def test_percentile_interpolates_between_ranks_like_numpy() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46)
    assert math.isnan(percentile([], 50))


def test_summary_of_two_requests() -> None:
    # A: TTFT 0.2 s, 11 tokens 0.03 s apart, 0.0 -> 0.5 s. B: TTFT 0.6 s, 11 tokens 0.04 s apart, 0.5 -> 1.5 s.
    a = streamed(0.0, 0.2, 0.03, 11)
    b = streamed(0.5, 0.6, 0.04, 11)
    figures = summarize([a, b], SLO)
    assert figures["completed"] == 2 and figures["errors"] == 0
    assert figures["duration_s"] == pytest.approx(1.5)
    assert figures["ttft_ms_p50"] == pytest.approx(400)
    assert figures["tpot_ms_mean"] == pytest.approx(35)  # (0.5-0.2)/10 and (1.0-0.6)/10
    assert figures["itl_ms_p50"] == pytest.approx(35)  # ten gaps of 30 ms and ten of 40 ms
    assert figures["output_tokens_per_s"] == pytest.approx(22 / 1.5)
    assert figures["requests_per_min"] == pytest.approx(80)
    assert figures["goodput_requests_per_min"] == pytest.approx(40)  # B's TTFT of 600 ms misses the SLO
    # llmperf's inter-token latency is end-to-end over output tokens, TTFT included: 0.5/11 and 1.0/11.
    assert figures["results_inter_token_latency_s_mean"] == pytest.approx((0.5 / 11 + 1.0 / 11) / 2)
    assert figures["results_request_output_throughput_token_per_s_mean"] == pytest.approx((22 + 11) / 2)
    assert figures["results_num_completed_requests_per_min"] == figures["requests_per_min"]


def test_refusals_failures_and_broken_streams_are_counted_apart() -> None:
    ok = streamed(0.0, 0.1, 0.01, 5)
    refused = Timing(start=0.0, end=0.01, status=429, error="busy")
    failed = Timing(start=0.0, end=0.01, status=502, error="engine gone")
    cut = streamed(0.0, 0.1, 0.01, 3)
    cut.error = "the stream ended without [DONE]"
    unreachable = Timing(start=0.0, end=0.01, status=0, error="ConnectError")
    figures = summarize([ok, refused, failed, cut, unreachable], SLO)
    assert figures["completed"] == 1 and figures["errors"] == 4
    assert (figures["status_429"], figures["status_5xx"], figures["lost"]) == (1, 1, 2)
    assert figures["results_error_rate"] == pytest.approx(0.8)
    assert figures["output_tokens_per_s"] == pytest.approx(5 / ok.e2e_s)  # only completed requests count


def test_change_is_in_percent_of_the_direct_figure() -> None:
    assert change_pct(100.0, 102.0) == pytest.approx(2.0)
    assert change_pct(200.0, 198.0) == pytest.approx(-1.0)
