"""The metrics bridge's reading of vLLM's /metrics: the real engine here (V1 names), and the V0 names of the
older vLLM in the images (vllm-project/vllm@f0afa0c28a31 vllm/engine/metrics.py)."""

from __future__ import annotations

from llm_gateway.engine_metrics import counter_increase, mean_ms, read_engine_metrics
from llm_local.engine import engine_client
from tests.llm.conftest import MODEL

# What a V0 vLLM serves at /metrics for these series (names, types and label from the commit above).
V0_EXPOSITION = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-2-13b"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-2-13b"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="llama-2-13b"} 0.42
# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="llama-2-13b"} 90.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="llama-2-13b"} 100.0
vllm:time_per_output_token_seconds_count{model_name="llama-2-13b"} 100.0
vllm:time_per_output_token_seconds_sum{model_name="llama-2-13b"} 4.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="llama-2-13b"} 101.0
"""


def test_reads_the_old_names():
    reading = read_engine_metrics(V0_EXPOSITION)
    assert (reading.running, reading.waiting, reading.kv_cache_usage) == (3.0, 7.0, 0.42)
    assert (reading.itl_sum_s, reading.itl_count, reading.generation_tokens) == (4.0, 100.0, 101.0)
    assert reading.ttft_count is None  # not in this exposition: None, not 0


def test_new_name_wins_where_both_are_served():
    both = V0_EXPOSITION + 'vllm:kv_cache_usage_perc{engine="0",model_name="llama-2-13b"} 0.25\n'
    assert read_engine_metrics(both).kv_cache_usage == 0.25


def test_reads_the_real_engine_around_a_request(engine_url):
    with engine_client(engine_url) as engine:
        before = read_engine_metrics(engine.get("/metrics").text)
        reply = engine.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": "hi", "max_tokens": 20, "ignore_eos": True},
            timeout=120,
        )
        assert reply.status_code == 200
        after = read_engine_metrics(engine.get("/metrics").text)
    assert after.running == 0 and after.waiting == 0
    assert after.kv_cache_usage is not None and 0.0 <= after.kv_cache_usage <= 1.0
    assert after.generation_tokens - before.generation_tokens == 20
    assert after.ttft_count - before.ttft_count == 1
    assert after.itl_count - before.itl_count == 19  # one interval between each two of the 20 tokens
    itl = mean_ms(before.itl_sum_s, before.itl_count, after.itl_sum_s, after.itl_count)
    assert itl is not None and itl > 0


def test_a_counter_increase_survives_an_engine_restart():
    assert counter_increase(10.0, 25.0) == 15.0
    assert counter_increase(40.0, 6.0) == 6.0  # the engine restarted: all it counted since
    assert counter_increase(None, 6.0) is None


# A prompt of many blocks (vLLM caches whole blocks of 16 tokens on the CPU), asked twice.
LONG_PROMPT = "The harbour master counts the boats that come home before the storm. " * 12


def test_the_real_engine_counts_its_prefix_cache_under_the_names_read(engine_url):
    """vLLM's prefix-cache counters are published under the names read (`_total`), and the second of two same
    prompts is found in the cache."""
    with engine_client(engine_url) as engine:
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 2}
        assert engine.post("/v1/completions", json=body, timeout=120).status_code == 200
        first = read_engine_metrics(engine.get("/metrics").text)
        reply = engine.post("/v1/completions", json=body, timeout=120)
        assert reply.status_code == 200
        second = read_engine_metrics(engine.get("/metrics").text)
    prompt_tokens = reply.json()["usage"]["prompt_tokens"]
    assert first.prefix_cache_queries is not None and first.prefix_cache_hits is not None
    queried = counter_increase(first.prefix_cache_queries, second.prefix_cache_queries)
    found = counter_increase(first.prefix_cache_hits, second.prefix_cache_hits)
    assert queried == prompt_tokens
    assert found is not None and prompt_tokens // 2 < found <= queried
