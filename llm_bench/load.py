"""A closed-loop load on /v1/completions (llmperf's way): `concurrency` clients, each sending its next
streamed request as soon as the last one ended, until `requests` have been sent. Prompts have the asked
number of tokens (calibrated on the server's own usage count) and differ from each other, so that the
engine's prefix cache does not shorten prefill; `ignore_eos` (vLLM's extension) makes every answer
exactly `output_tokens` long.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from llm_bench.report import Timing

WORDS = ("the", "sea", "light", "house", "keeper", "night", "storm", "ship", "harbour", "rock", "wave", "wind",
         "lamp", "tower", "coast", "fog", "bell", "signal", "stone", "island", "water", "boat")  # fmt: skip
CALIBRATION_WORDS = 400


@dataclass(frozen=True)
class Load:
    """The shape of one run."""

    input_tokens: int
    output_tokens: int
    concurrency: int
    requests: int


def prompt(words: int, rng: random.Random) -> str:
    """`words` words drawn by `rng`, led by a random number so that no two prompts share a prefix."""
    return f"{rng.randrange(10**9)} " + " ".join(rng.choice(WORDS) for _ in range(words))


async def tokens_per_word(client: httpx.AsyncClient, model: str) -> float:
    """The server's prompt tokens per word of `prompt`, from the usage of a one-token completion."""
    text = prompt(CALIBRATION_WORDS, random.Random(0))  # noqa: S311  # prompt text, not a secret
    response = await client.post("/v1/completions", json={"model": model, "prompt": text, "max_tokens": 1})
    response.raise_for_status()
    return response.json()["usage"]["prompt_tokens"] / (CALIBRATION_WORDS + 1)


async def one_request(
    client: httpx.AsyncClient, model: str, text: str, output_tokens: int, headers: Mapping[str, str] | None = None
) -> Timing:
    """Send one streamed completion (with `headers`, such as its X-Request-Id) and time it; transport failures are
    recorded, not raised."""
    body = {
        "model": model,
        "prompt": text,
        "max_tokens": output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    timing = Timing(start=time.monotonic(), end=0.0, status=0)
    finished = False
    try:
        async with client.stream("POST", "/v1/completions", json=body, headers=headers) as response:
            timing.status = response.status_code
            if response.status_code != 200:
                timing.error = (await response.aread()).decode(errors="replace")[:300]
            else:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        finished = True
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        timing.error = str(chunk["error"].get("message"))
                        break
                    if chunk.get("usage"):
                        timing.input_tokens = chunk["usage"]["prompt_tokens"]
                        timing.output_tokens = chunk["usage"]["completion_tokens"]
                    if any(choice.get("text") for choice in chunk.get("choices", [])):
                        now = time.monotonic()
                        timing.token_times.append(now)
                        if timing.ttft_s is None:
                            timing.ttft_s = now - timing.start
                if not finished and timing.error is None:
                    timing.error = "the stream ended without [DONE]"
    except httpx.HTTPError as exc:
        timing.error = f"{type(exc).__name__}: {exc}"
    timing.end = time.monotonic()
    return timing


async def run_load(
    base_url: str, model: str, load: Load, *, seed: int | str = 1, auth: httpx.Auth | None = None
) -> list[Timing]:
    """Run `load` against `base_url` (a server's root, /v1 is added) and return every request's timing;
    `auth` signs each request (llm_bench/token.py). Runs with different seeds send different prompts."""
    limits = httpx.Limits(max_connections=load.concurrency + 4, max_keepalive_connections=load.concurrency + 4)
    timeout = httpx.Timeout(connect=30.0, read=None, write=60.0, pool=None)
    async with httpx.AsyncClient(base_url=base_url.rstrip("/"), limits=limits, timeout=timeout, auth=auth) as client:
        words = max(1, round(load.input_tokens / await tokens_per_word(client, model)) - 1)
        rng = random.Random(seed)  # noqa: S311  # prompt text, not a secret
        prompts = [prompt(words, rng) for _ in range(load.requests)]
        timings: list[Timing] = []

        async def worker() -> None:
            while prompts:
                timings.append(await one_request(client, model, prompts.pop(), load.output_tokens))

        await asyncio.gather(*(worker() for _ in range(min(load.concurrency, load.requests))))
        return timings


async def first_model(base_url: str, auth: httpx.Auth | None = None) -> str:
    """The first model the server lists."""
    async with httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=30, auth=auth) as client:
        response = await client.get("/v1/models")
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])
