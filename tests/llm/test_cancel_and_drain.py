"""What happens to a generation when its client goes away, and to open streams when the gateway is stopped."""

from __future__ import annotations

import signal

import httpx
import openai
import pytest

from tests.llm.conftest import MODEL, client_for
from tests.llm.stack import GatewayProcess, engine_metric, run_gateway, wait_until

# Long enough that the engine is usually still generating when the test acts (the context is 4096 tokens): a
# generation that was not stopped shows as LONG tokens in vLLM's counter, a stopped one as fewer.
LONG = 4000
MARGIN = LONG // 4
EXACT = {"ignore_eos": True}


def running(engine_url: str) -> float:
    return engine_metric(engine_url, "vllm:num_requests_running")


def generated(engine_url: str) -> float:
    """Tokens vLLM generated so far (its counter of client aborts stays 0: they skip its finish stats)."""
    return engine_metric(engine_url, "vllm:generation_tokens_total")


def assert_stopped_before_the_end(engine_url: str, before: float, when_acted: float) -> None:
    """vLLM ended the generation before its LONG tokens, if it could: `when_acted` is its counter (less `before`)
    when the client left or the stream was cut. An engine that makes tokens faster than the client reads them may
    have made (nearly) all of them by then; there is nothing left to stop, and only the client's side is checked."""
    wait_until(lambda: running(engine_url) == 0, 20, "vLLM ends the generation")
    if when_acted < LONG - MARGIN:
        assert generated(engine_url) - before < LONG, "vLLM ran the generation to its end"


def assert_clean_exit(gateway: GatewayProcess) -> None:
    """The gateway stopped by itself after its drain, with status 0: a clean stop to its supervisor."""
    assert gateway.process.wait(timeout=30) == 0
    assert "Finished server process" in gateway.log.read_text(encoding="utf-8"), gateway.tail()


def test_client_going_away_mid_stream_aborts_the_generation(client, gateway, engine_url):
    generated_before = generated(engine_url)
    before = len(gateway.records())
    stream = client.completions.create(model=MODEL, prompt="a", max_tokens=LONG, stream=True, extra_body=EXACT)
    chunks = iter(stream)
    for _ in range(3):
        next(chunks)
    when_closed = generated(engine_url) - generated_before
    stream.close()
    assert_stopped_before_the_end(engine_url, generated_before, when_closed)
    record = gateway.wait_record(before + 1)[-1]
    assert record["outcome"] == "client_gone" and "completion_tokens" not in record  # the log leaves out None


def test_sigterm_mid_stream_lets_the_stream_finish(engine_url, tmp_path):
    with run_gateway(engine_url, tmp_path, {"SHUTDOWN_GRACE_S": "60"}) as gateway:
        client = client_for(gateway.url)
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            # Still streaming while the test probes the draining gateway: 600 tokens (the CPU engine sometimes makes
            # 2,500 a second) could all fit in the socket buffers before this client read them, and the gateway,
            # drained, was gone before its readiness was asked. LONG tokens' events are more than the buffers hold.
            max_tokens=LONG,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=EXACT,
        )
        chunks = iter(stream)
        first = next(chunks)
        gateway.terminate()
        wait_until(
            lambda: httpx.get(f"{gateway.url}/readiness").status_code == 503, 10, "readiness turns 503 on SIGTERM"
        )
        with pytest.raises(openai.APIStatusError) as refused:
            client.completions.create(model=MODEL, prompt="new", max_tokens=2)
        assert refused.value.status_code == 503 and refused.value.response.headers["retry-after"]
        rest = [first, *chunks]
        assert rest[-1].usage is not None and rest[-1].usage.completion_tokens == LONG  # the whole answer
        assert_clean_exit(gateway)
        outcomes = [record["outcome"] for record in gateway.records()]
        assert sorted(outcomes) == ["completed", "refused"]


def test_sigterm_mid_stream_past_the_grace_ends_the_stream_with_an_error(engine_url, tmp_path):
    # A grace of 1 s: the drain waits 0.75 s of it (the rest is uvicorn's, to send the cut stream its error). The CPU
    # engine sometimes streams 2,500 tokens a second here, which ran all LONG tokens within the 1.5 s that a grace of
    # 2 s gave the drain.
    with run_gateway(engine_url, tmp_path, {"SHUTDOWN_GRACE_S": "1"}) as gateway:
        client = client_for(gateway.url)
        client.completions.create(model=MODEL, prompt="warm", max_tokens=2)  # a new gateway's first request is slow
        generated_before = generated(engine_url)
        stream = client.completions.create(model=MODEL, prompt="a", max_tokens=LONG, stream=True, extra_body=EXACT)
        chunks = iter(stream)
        next(chunks)
        received = 1
        gateway.process.send_signal(signal.SIGTERM)
        with pytest.raises(openai.APIError) as caught:
            for _ in chunks:
                received += 1
        generated_at_cut = generated(engine_url) - generated_before
        assert "shut down" in str(caught.value)
        assert received < LONG - MARGIN, "the stream was nearly done before the grace ran out: raise LONG"
        assert_clean_exit(gateway)
        assert_stopped_before_the_end(engine_url, generated_before, generated_at_cut)
        assert [record["outcome"] for record in gateway.records()] == ["completed", "cut"]  # the warm-up, the cut
