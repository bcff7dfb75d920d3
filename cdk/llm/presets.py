"""The catalog of verified LLM presets: one setting (`llmModel`) picks a model and everything the synth needs.

Each preset holds two kinds of values:
- facts about the model, each a `Sourced` value with the place it was read: Hub id, licence, whether the Hub
  gates it, attention and KV heads (the config.json's num_attention_heads, num_key_value_heads, which staging
  checks again against the downloaded config.json), the weights' size and its Neuron support level;
- what we chose to run it with, per accelerator: the instance (cdk/instance_types.py, whose price the cost
  weights, dashboards and benchmark then use), the tensor parallel degree, the vLLM container's CPU and
  memory (sized so the pod and the platform's DaemonSets fit that instance: tests/cdk/test_llm_presets.py),
  and the sequence length and batch.

Neuron support levels come from the model list of the NxD Inference pinned through VLLM_NEURON_IMAGE (SDK 2.28,
NxD Inference 0.8): aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/
model-reference.rst, "Compatible Checkpoint Examples". A checkpoint listed plainly is "tested"; one listed with
"(Not tested, but expected to work out of the box)", or only covered by its architecture's section, is
"expected to work".

Revisions: no source readable offline names a Hub commit of these repositories, so every preset stages `main`;
docs/first-deploy.md lists the command that reads each commit to pin (`llmModelRevision`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from cdk import versions
from cdk.serving.catalog import Sourced

NeuronSupport = Literal["tested", "expected to work"]

_MODEL_REFERENCE: Final = (
    "aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/model-reference.rst"
)
# Inf2 tensor parallel degrees NxD Inference supports: "Inf2: 1, 2, 4, 8, and 24"
# (aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/feature-guide.rst). Every preset
# uses 2: both NeuronCores of one Inferentia2 chip.
NEURON_TENSOR_PARALLEL: Final = 2


@dataclass(frozen=True)
class PresetFit:
    """How a preset runs on one accelerator: the instance it is priced on and the pod that fits it."""

    instance_type: str
    tensor_parallel: int
    cpu: float  # the vLLM container's CPU request
    memory_gi: int  # ... and memory request (= limit)


@dataclass(frozen=True)
class LlmPreset:
    """One catalog entry; `name` is both the `llmModel` value and the name clients send as `model`."""

    name: str
    model_id: Sourced[str]
    licence: Sourced[str]
    gated: Sourced[bool]
    attention_heads: Sourced[int]
    kv_heads: Sourced[int]
    size_gi: Sourced[int]  # the staged weights (bf16 safetensors), rounded up, for the volumes that hold them
    neuron_support: Sourced[NeuronSupport]
    # vLLM's `--tool-call-parser` for the model's chat template (cdk/llm/engine.py starts vLLM with it); the model's
    # own chat template (its tokenizer_config.json) renders the tools, so no `--chat-template` is given.
    tool_call_parser: Sourced[str]
    max_model_len: int
    max_num_seqs: int
    per_accelerator: Mapping[str, PresetFit]

    def settings(self) -> dict[str, Any]:
        """The preset as the context keys it stands for (explicit settings override each)."""
        values: dict[str, Any] = {
            "llmModelId": self.model_id.value,
            "llmServedModelName": self.name,
            "llmModelAttentionHeads": self.attention_heads.value,
            "llmModelKvHeads": self.kv_heads.value,
            "llmModelSizeGi": self.size_gi.value,
            "llmToolCallParser": self.tool_call_parser.value,
            "llmMaxModelLen": self.max_model_len,
            "llmMaxNumSeqs": self.max_num_seqs,
        }
        for acc, fit in self.per_accelerator.items():
            suffix = acc[0].upper() + acc[1:]
            values[f"llmInstanceType{suffix}"] = fit.instance_type
            values[f"llmTensorParallel{suffix}"] = fit.tensor_parallel
            values[f"llmCpu{suffix}"] = fit.cpu
            values[f"llmMemoryGi{suffix}"] = fit.memory_gi
        return values


# vLLM's tool-call parsers, by their registered names (`--tool-call-parser`). Both names are registered in the two
# vLLMs the images carry. Verified: PyPI vllm==0.13.0 and vllm==0.27.1 wheels, vllm/tool_parsers/__init__.py
# (_TOOL_PARSERS_TO_REGISTER: "hermes" -> Hermes2ProToolParser, "llama3_json" -> Llama3JsonToolParser).
# Which model takes which: vllm-project/vllm@0064cc9cb1ae docs/features/tool_calling.md ("For Qwen2.5, the chat
# template in tokenizer_config.json has already included support for the Hermes-style tool use ... Flags:
# `--tool-call-parser hermes`"; Llama 3.1: "`llama3_json`", JSON-based tool calling, no parallel tool calls).
# That page also offers vLLM's own Llama 3.1 template (examples/tool_chat_template_llama3.1_json.jinja), but
# neither wheel ships it (unzip -l: no tool_chat_template_*), and the page says Llama's tokenizer_config.json
# template is tool-compatible: the model's own template serves.
_HERMES_TOOLS: Final = "vllm-project/vllm@0064cc9cb1ae docs/features/tool_calling.md (Qwen Models: hermes)"
_LLAMA3_TOOLS: Final = "vllm-project/vllm@0064cc9cb1ae docs/features/tool_calling.md (Llama Models: llama3_json)"

# 4 vCPU / 16 GiB nodes leave 3920m and 14162Mi allocatable, less 731m/311Mi (Neuron) or 725m/311Mi (NVIDIA) of
# DaemonSets (cdk/node_fit.py) and the gateway's 250m/256Mi: 2.5 vCPU and 12 GiB for vLLM fit with room to spare.
_SMALL_NODE_CPU: Final = 2.5
_SMALL_NODE_MEMORY_GI: Final = 12

QWEN25_1_5B: Final = LlmPreset(
    name="qwen2.5-1.5b-instruct",
    model_id=Sourced(versions.LLM_DEFAULT_MODEL_ID, f"{_MODEL_REFERENCE} (Qwen2.5 compatible checkpoints)"),
    licence=Sourced("Apache-2.0", "docs/evidence/llm-serving.md section 4 (the model card's licence: apache-2.0)"),
    gated=Sourced(False, "docs/evidence/llm-serving.md section 4; first-deploy row `curl .../api/models/...`"),
    # config.json: num_attention_heads 12, num_key_value_heads 2 (docs/evidence/llm-serving.md section 4, as
    # staged and checked since issue 18).
    attention_heads=Sourced(12, "Qwen/Qwen2.5-1.5B-Instruct config.json (docs/evidence/llm-serving.md section 4)"),
    kv_heads=Sourced(2, "Qwen/Qwen2.5-1.5B-Instruct config.json (docs/evidence/llm-serving.md section 4)"),
    # 1.54 billion bf16 parameters: 3.1 GB.
    size_gi=Sourced(4, "docs/evidence/llm-serving.md section 4 (1.54B parameters, bf16)"),
    neuron_support=Sourced("expected to work", f"{_MODEL_REFERENCE}: '(Not tested, but expected to work ...)'"),
    tool_call_parser=Sourced("hermes", _HERMES_TOOLS),
    max_model_len=4096,
    max_num_seqs=8,
    per_accelerator={
        "neuron": PresetFit("inf2.xlarge", NEURON_TENSOR_PARALLEL, _SMALL_NODE_CPU, _SMALL_NODE_MEMORY_GI),
        # g6 (L4, 24 GB) is the cheapest single-GPU type the default nvidiaInstanceFamilies allow.
        "nvidia": PresetFit("g6.xlarge", 1, _SMALL_NODE_CPU, _SMALL_NODE_MEMORY_GI),
    },
)

# 7-8B models: about 15-16 GB of bf16 weights. On Neuron they fit one Inferentia2 chip's 32 GB at tensor parallel
# degree 2 ("meta-llama/Meta-Llama-3.1-8B ... requires about 16GB memory. Therefore, a trn1.2xlarge with 32GB
# device memory is sufficient", aws-neuron-sdk@85e68631b51b feature-guide.rst), but loading them needs more host
# memory than an inf2.xlarge's 16 GiB, so the instance is the one-chip inf2.8xlarge (128 GiB). On NVIDIA one
# 24 GB L4 holds them with a few GB of KV cache; the 8-vCPU g6.2xlarge gives the host 32 GiB for the load.
_LARGE_FIT: Final = {
    "neuron": PresetFit("inf2.8xlarge", NEURON_TENSOR_PARALLEL, 8, 64),
    "nvidia": PresetFit("g6.2xlarge", 1, 6, 24),
}

QWEN25_7B: Final = LlmPreset(
    name="qwen2.5-7b-instruct",
    model_id=Sourced("Qwen/Qwen2.5-7B-Instruct", f"{_MODEL_REFERENCE} (Qwen2.5 compatible checkpoints)"),
    licence=Sourced(
        "Apache-2.0",
        "daniel-p-green/alain-ai-learning-platform out/research-qwen-qwen2-5-7b-instruct/README.md ('License: "
        "Apache-2.0'); verify on the Hub (docs/first-deploy.md)",
    ),
    gated=Sourced(False, "not gated: docs/first-deploy.md's `curl .../api/models/Qwen/Qwen2.5-7B-Instruct` row"),
    # "28 query heads and 4 key/value heads", 28 layers (api.emergentmind.com topics/qwen-2-5-7b-instruct);
    # the same 3584-wide q_proj and 512-wide k_proj/v_proj (4 x 128) in Retruth/deontic nlp_models/qwen2/README.md.
    attention_heads=Sourced(28, "emergentmind.com Qwen 2.5 7B Instruct overview ('28 query heads')"),
    kv_heads=Sourced(4, "emergentmind.com Qwen 2.5 7B Instruct overview ('4 key/value heads')"),
    # 7,615,616,512 bf16 parameters (the Hub's safetensors metadata of Qwen/Qwen2.5-7B-Instruct, quoted as "Real Hub
    # metadata" in Khaeldur/overflowml@eff69efefa8f tests/test_inspect.py): 15.2 GB = 14.19 GiB.
    size_gi=Sourced(16, "Khaeldur/overflowml@eff69efefa8f tests/test_inspect.py (BF16 7,615,616,512 parameters)"),
    neuron_support=Sourced("tested", f"{_MODEL_REFERENCE}: listed plainly among Qwen2.5 checkpoints"),
    tool_call_parser=Sourced("hermes", _HERMES_TOOLS),
    max_model_len=4096,
    max_num_seqs=8,
    per_accelerator=_LARGE_FIT,
)

LLAMA31_8B: Final = LlmPreset(
    name="llama-3.1-8b-instruct",
    model_id=Sourced(
        "meta-llama/Llama-3.1-8B-Instruct",
        "aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/vllm-user-guide.rst "
        "(examples use meta-llama/Llama-3.1-8B-Instruct)",
    ),
    licence=Sourced(
        "Llama 3.1 Community License",
        "rh-ai-quickstart/ai-virtual-agent#200 (2026-02-21: accepting the 'LLAMA 3.1 COMMUNITY LICENSE AGREEMENT')",
    ),
    # Gated: "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted and you are not in the authorized
    # list" (the same issue); staging needs servingHubTokenSecretName with a token whose account was granted access.
    gated=Sourced(True, "rh-ai-quickstart/ai-virtual-agent#200 (403 on config.json without granted access)"),
    # "meta-llama/Meta-Llama-3.1-8B has 32 attention heads" (aws-neuron-sdk@85e68631b51b feature-guide.rst);
    # Llama 3.1 8B: 32 attention heads, 8 KV heads, 32 layers, hidden 4096 (vulkomilev/oumi
    # configs/recipes/llama3_1/README.md).
    attention_heads=Sourced(32, "aws-neuron-sdk feature-guide.rst; oumi configs/recipes/llama3_1/README.md"),
    kv_heads=Sourced(8, "oumi configs/recipes/llama3_1/README.md ('Num KV heads | 8')"),
    # "about 16GB" in bf16 (aws-neuron-sdk@85e68631b51b feature-guide.rst); 8,030,261,248 parameters for the Llama 3
    # 8B shape, 32/8 heads (Khaeldur/overflowml@eff69efefa8f tests/test_inspect.py): 16.06 GB = 14.96 GiB.
    size_gi=Sourced(16, "aws-neuron-sdk feature-guide.rst ('about 16GB'); overflowml tests/test_inspect.py (8.03B)"),
    # The Llama section "supports all Llama text models, including ... Llama 3.1"; its checkpoint list names
    # Meta-Llama-3-8B-Instruct, not 3.1-8B.
    neuron_support=Sourced("expected to work", f"{_MODEL_REFERENCE}: Llama architecture, checkpoint not listed"),
    tool_call_parser=Sourced("llama3_json", _LLAMA3_TOOLS),
    max_model_len=4096,
    max_num_seqs=8,
    per_accelerator=_LARGE_FIT,
)

PRESETS: Final[dict[str, LlmPreset]] = {p.name: p for p in (QWEN25_1_5B, QWEN25_7B, LLAMA31_8B)}
DEFAULT_PRESET: Final = QWEN25_1_5B.name


def preset_for_model_id(model_id: str) -> LlmPreset | None:
    """The preset of a Hub id as users write it (`Qwen/Qwen2.5-7B-Instruct`), or None outside the catalog."""
    return next((p for p in PRESETS.values() if p.model_id.value == model_id), None)
