"""The benchmark's arithmetic on per-request timings: latency percentiles, throughput, goodput at an SLO,
and the llmperf-named columns.

Two "inter-token latency"s are in use and both are reported under their own names:
- vLLM's (`vllm bench serve`): the gaps between streamed tokens (`itl_*`), and time per output token
  after the first (`tpot` = (end-to-end - TTFT) / (output tokens - 1)).
- llmperf's `inter_token_latency_s`: end-to-end time over output tokens, TTFT included (its
  token_benchmark_ray.py; the summary keys below are llmperf's `results_*` names).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Timing:
    """One request as the client saw it (seconds on the monotonic clock)."""

    start: float
    end: float
    status: int
    ttft_s: float | None = None
    token_times: list[float] = field(default_factory=list)  # when each content chunk arrived
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Answered 200 and streamed to its end with tokens."""
        return self.status == 200 and self.error is None and self.output_tokens > 0 and self.ttft_s is not None

    @property
    def e2e_s(self) -> float:
        """End-to-end latency."""
        return self.end - self.start

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (vLLM's TPOT); None for a one-token answer."""
        if self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Slo:
    """The service-level objective a request must meet to count towards goodput."""

    ttft_ms: float
    tpot_ms: float

    def met_by(self, timing: Timing) -> bool:
        """Whether `timing` is a success within both bounds."""
        tpot = timing.tpot_s
        return (
            timing.ok
            and timing.ttft_s is not None
            and timing.ttft_s * 1000 <= self.ttft_ms
            and (tpot is None or tpot * 1000 <= self.tpot_ms)
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between ranks (numpy's default); nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float:
    """The mean; nan when empty."""
    return sum(values) / len(values) if values else math.nan


def summarize(timings: Sequence[Timing], slo: Slo) -> dict[str, float]:
    """The figures of one run: ours (ms, per second, per minute) and llmperf's `results_*` columns."""
    done = [t for t in timings if t.ok]
    duration = (max(t.end for t in timings) - min(t.start for t in timings)) if timings else math.nan
    ttfts = [t.ttft_s for t in done if t.ttft_s is not None]
    gaps = [b - a for t in done for a, b in zip(t.token_times, t.token_times[1:], strict=False)]
    tpots = [tp for t in done if (tp := t.tpot_s) is not None]
    e2es = [t.e2e_s for t in done]
    output_tokens = sum(t.output_tokens for t in done)
    llmperf_itl = [t.e2e_s / t.output_tokens for t in done]
    per_request_tps = [t.output_tokens / t.e2e_s for t in done if t.e2e_s > 0]
    per_minute = 60 / duration if duration > 0 else math.nan
    errors = len(timings) - len(done)
    return {
        "requests": len(timings),
        "completed": len(done),
        "errors": errors,
        "status_5xx": sum(1 for t in timings if t.status >= 500),
        "status_429": sum(1 for t in timings if t.status == 429),
        "lost": sum(1 for t in timings if t.status == 0 or (t.status == 200 and not t.ok)),
        "duration_s": duration,
        "input_tokens_mean": mean([t.input_tokens for t in done]),
        "output_tokens_mean": mean([t.output_tokens for t in done]),
        "ttft_ms_p50": percentile(ttfts, 50) * 1000,
        "ttft_ms_p90": percentile(ttfts, 90) * 1000,
        "ttft_ms_p99": percentile(ttfts, 99) * 1000,
        "itl_ms_p50": percentile(gaps, 50) * 1000,
        "itl_ms_p99": percentile(gaps, 99) * 1000,
        "tpot_ms_mean": mean(tpots) * 1000,
        "tpot_ms_p50": percentile(tpots, 50) * 1000,
        "e2e_s_p50": percentile(e2es, 50),
        "output_tokens_per_s": output_tokens / duration if duration > 0 else math.nan,
        "requests_per_min": len(done) * per_minute,
        "goodput_requests_per_min": sum(1 for t in done if slo.met_by(t)) * per_minute,
        # llmperf's summary keys (token_benchmark_ray.py: `results_` + metric + `_mean` / `_quantiles_pNN`)
        "results_ttft_s_mean": mean(ttfts),
        "results_inter_token_latency_s_mean": mean(llmperf_itl),
        "results_inter_token_latency_s_quantiles_p50": percentile(llmperf_itl, 50),
        "results_end_to_end_latency_s_mean": mean(e2es),
        "results_request_output_throughput_token_per_s_mean": mean(per_request_tps),
        "results_mean_output_throughput_token_per_s": output_tokens / duration if duration > 0 else math.nan,
        "results_num_completed_requests_per_min": len(done) * per_minute,
        "results_error_rate": errors / len(timings) if timings else math.nan,
    }


def change_pct(direct: float, through: float) -> float:
    """How much `through` differs from `direct`, in percent of `direct`."""
    return (through - direct) / direct * 100 if direct else math.nan


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table (numbers with up to two decimals)."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return "n/a" if math.isnan(value) else f"{value:,.2f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
