"""The overhead part of `python -m llm_bench` sends every target and round prompts of its own (finding 11): vLLM's
prefix cache would otherwise hand the second target of a round the prefill the first had paid for, and the
comparison would measure the cache, not the gateway. Run against the pace stand-in (llm_bench/standin_engine.py)
directly and through a real gateway; nothing is timed here."""

from __future__ import annotations

import random
from pathlib import Path

from llm_bench import __main__ as bench
from llm_bench.load import CALIBRATION_WORDS, prompt
from llm_bench.report import Slo
from llm_bench.standin_engine import STANDIN_MODEL
from tests.llm.stack import run_gateway, run_standin


def test_no_two_targets_or_rounds_share_a_prompt_prefix(tmp_path: Path) -> None:
    with (
        run_standin(record=True) as (direct_url, direct),
        run_standin(record=True) as (behind_url, behind),
        run_gateway(behind_url, tmp_path) as gateway,
    ):
        args = bench.parse_args(
            [
                f"--engine-url={direct_url}",
                f"--gateway-url={gateway.url}",
                "--input-tokens=12",
                "--output-tokens=2",
                "--overhead-concurrency=1,2",
                "--overhead-requests=3",
                "--rounds=2",
            ]
        )
        target = bench.Target(direct_url, gateway.url, Path("vllm"), STANDIN_MODEL, {})
        _, rows = bench.overhead(args, target, direct_url, STANDIN_MODEL, Slo(ttft_ms=1000, tpot_ms=100))
    assert [row[0] for row in rows] == [1, 2] and all(row[-2] == 0 for row in rows)  # streams; no errors
    # The one-token calibration request that sizes the prompts is the same every time and is not timed.
    calibration = prompt(CALIBRATION_WORDS, random.Random(0))  # noqa: S311  # prompt text, not a secret
    sent = {
        "direct": [p for p in direct.prompts if p != calibration],
        "gateway": [p for p in behind.prompts if p != calibration],
    }
    # Per count: a warm-up of `count` requests, then 2 rounds of max(3, 2 x count) requests, per target.
    assert [len(prompts) for prompts in sent.values()] == [1 + 2 * 3 + 2 + 2 * 4] * 2
    # The prefix cache works on whole leading blocks; each prompt starts with its own number, so no two of them,
    # on either target, in any round, share a leading block.
    leading = [p.split()[0] for prompts in sent.values() for p in prompts]
    assert len(set(leading)) == len(leading), "two prompts share a prefix"
