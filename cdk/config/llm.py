"""Deploy-time settings of LLM serving (vLLM behind the LLM gateway), read from CDK context: the `llm*` keys.

`llmEnabled` (false by default) switches the whole workload; with it off no other `llm*` key (nor
`alarmTtftP90Ms`, the LLM's own alarm) is read and the templates are what they are without LLM serving.
Per-accelerator keys end in the accelerator's name with a capital (`...Neuron`, `...Nvidia`), as the serving
keys do. docs/llm-serving.md explains each key.

The model comes from the catalog of verified presets (cdk/llm/presets.py): `llmModel` names one, or `llmModelId`
set to a catalog model's Hub id picks its preset, and neither picks the default. A preset stands for the model's
facts and the shape it runs in (PRESET_KEYS); a key set explicitly overrides that one fact. A Hub id outside the
catalog must set every fact itself, or the synth stops naming the missing settings.

The model's shape (`llmModelAttentionHeads`, `llmModelKvHeads`) comes from its config.json
(`num_attention_heads`, `num_key_value_heads`): it decides which tensor parallel degrees can work, so an
impossible degree stops the synth here instead of failing a pod an hour into a deploy. The instance each
accelerator's replica runs on (`llmInstanceType<Acc>`) decides the price the cost weights, dashboards and
benchmark use (cdk/instance_types.py) unless `llmPricePerHour<Acc>` is set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError, Context
from cdk.config.hub_token import require_hub_token
from cdk.config.instances import read_instance_type
from cdk.instance_types import InstanceType
from cdk.llm.presets import DEFAULT_PRESET, PRESETS, LlmPreset, preset_for_model_id

ENABLED_KEY: Final = "llmEnabled"
MODEL_KEY: Final = "llmModel"
# An alarm* key like the image service's alarm settings, but read only with llmEnabled.
TTFT_ALARM_KEY: Final = "alarmTtftP90Ms"
# NeuronCores per Neuron device (chip): Inferentia2 has two NeuronCore-v2.
# Verified: awsdocs-neuron.readthedocs-hosted.com general/arch/neuron-hardware/inferentia2 ("each with two
# NeuronCore-v2 cores"; "up to twelve Inferentia2 chips" per Inf2 instance).
NEURON_CORES_PER_DEVICE: Final = {"inf2": 2}
# The most accelerator devices one instance of a family has (Neuron chips, NVIDIA GPUs): a pod asking for more
# could never be scheduled. Verified: Neuron docs as above (inf2.48xlarge: 12 chips); the NVIDIA families'
# largest sizes have 8 GPUs (g4dn.metal, g5.48xlarge, g6.48xlarge, g6e.48xlarge, p4d/p5/p5e/p6.48xlarge) and
# gr6 one. Verify on first deploy (docs/first-deploy.md): aws ec2 describe-instance-types --filters \
#   Name=instance-type,Values=g5.48xlarge,g6.48xlarge,inf2.48xlarge \
#   --query 'InstanceTypes[].[InstanceType,GpuInfo.Gpus[0].Count,NeuronInfo.NeuronDevices[0].Count]'
MAX_DEVICES_PER_FAMILY: Final = {
    "inf2": 12,
    "g4dn": 8,
    "g5": 8,
    "g6": 8,
    "g6e": 8,
    "gr6": 1,
    "p4d": 8,
    "p5": 8,
    "p5e": 8,
    "p6": 8,
}
_HUB_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_HUB_REVISION = r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,199}"
_SERVED_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
# vLLM's tool-parser names (vllm/tool_parsers/__init__.py: "hermes", "llama3_json", "granite-20b-fc", ...); vLLM
# itself checks the name at start (--enable-auto-tool-choice needs a registered one), this only keeps it one word.
_TOOL_PARSER = r"[a-z0-9][a-z0-9_.-]{0,63}"
# `llmToolCallParser` = none: vLLM starts without auto tool choice (a model whose template knows no tools).
NO_TOOL_PARSER: Final = "none"
# `llmRouter`: vLLM's router (vllm-router, cdk/llm/router.py) in front of each pool's pods, by one of its policies
# (`vllm-router --help` at VLLM_ROUTER_VERSION lists both names), or off: the load balancer reaches the pods' gateways.
ROUTER_KEY: Final = "llmRouter"
ROUTER_OFF: Final = "off"
ROUTER_POLICIES: Final = ("power_of_two", "cache_aware")
# Why cache_aware cannot serve a pool, per accelerator. The policy posts each request to every worker's render route
# (/v1/chat/completions/render, /v1/completions/render; read from vllm-router 0.1.17's requests to a stand-in).
# vLLM 0.27.1 (the NVIDIA image) registers them for every generating model with no flag (PyPI wheel:
# vllm/entrypoints/scale_out/factories.py register_scale_out_api_routers, called from openai/api_server.py), and the
# gateway forwards them there (RENDER_ROUTES, cdk/llm/workload.py); vLLM 0.13.0 (the Neuron image) has no such route
# (none in the PyPI wheel's vllm/entrypoints).
CACHE_AWARE_BLOCKERS: Final = {"neuron": "vLLM 0.13.0 in the Neuron image has no render route"}


def _suffix(accelerator: str) -> str:
    return accelerator[0].upper() + accelerator[1:]


def preset_keys(accelerators: Sequence[str]) -> tuple[str, ...]:
    """The settings a preset stands for on `accelerators`: what a model outside the catalog must set itself."""
    per_acc = ("llmInstanceType", "llmTensorParallel", "llmCpu", "llmMemoryGi")
    return (
        "llmModelId",
        "llmServedModelName",
        "llmModelAttentionHeads",
        "llmModelKvHeads",
        "llmModelSizeGi",
        "llmToolCallParser",
        "llmMaxModelLen",
        "llmMaxNumSeqs",
        *(f"{stem}{_suffix(acc)}" for acc in accelerators for stem in per_acc),
    )


def resolve_preset(values: Mapping[str, Any]) -> LlmPreset | None:
    """The preset `llmModel` names, else the one whose Hub id `llmModelId` is, else (neither set) the default;
    None for a Hub id outside the catalog."""
    name = values.get(MODEL_KEY)
    if name not in (None, ""):
        if name not in PRESETS:
            raise ConfigError(
                f"setting '{MODEL_KEY}' = {name!r} is invalid: expected one of {', '.join(PRESETS)} "
                "(docs/llm-serving.md lists them; a model outside the catalog sets 'llmModelId' and its facts instead)"
            )
        model_id = values.get("llmModelId")
        other = preset_for_model_id(str(model_id)) if model_id not in (None, "") else None
        if other is not None and other.name != name:
            raise ConfigError(
                f"settings '{MODEL_KEY}' = {name!r} and 'llmModelId' = {model_id!r} name two catalog models: "
                f"set one ('{MODEL_KEY}' = {other.name!r} picks that model with its own shape)"
            )
        return PRESETS[name]
    model_id = values.get("llmModelId")
    if model_id in (None, ""):
        return PRESETS[DEFAULT_PRESET]
    return preset_for_model_id(str(model_id))


def with_preset(values: Mapping[str, Any], accelerators: Sequence[str]) -> tuple[dict[str, Any], LlmPreset | None]:
    """The context with the chosen preset's facts under every key not set explicitly, and that preset.

    A Hub id outside the catalog without some of its facts stops here, naming every missing setting at once.
    """
    preset = resolve_preset(values)
    if preset is None:
        missing = [key for key in preset_keys(accelerators) if values.get(key) in (None, "")]
        if missing:
            raise ConfigError(
                f"setting 'llmModelId' = {values.get('llmModelId')!r} is not in the LLM catalog "
                f"({', '.join(p.model_id.value for p in PRESETS.values())}), so its facts must be set: missing "
                + ", ".join(f"'{key}'" for key in missing)
                + " (docs/llm-serving.md, 'A model outside the catalog')"
            )
        return dict(values), None
    # An empty value is no value (`-c llmModelId=` or cdk.json's ""): the preset's fact stands.
    explicit = {k: v for k, v in values.items() if v not in (None, "")}
    return {**preset.settings(), **explicit}, preset


def requests_per_minute_key(accelerator: str) -> str:
    """The setting of what one replica on `accelerator` sustains within the SLO (the benchmark Job measures it)."""
    return f"llmRequestsPerMinute{_suffix(accelerator)}"


@dataclass(frozen=True)
class LlmAccelerator:
    """The LLM Deployment on one accelerator."""

    accelerator: str
    instance: InstanceType  # llmInstanceType<Acc>: the instance one replica is sized for and priced at
    tensor_parallel: int  # llmTensorParallel<Acc>: NeuronCores (Neuron) or GPUs (NVIDIA) one replica shards over
    devices: int  # Neuron chips or GPUs the pod asks for, from the degree
    min_replicas: int
    max_replicas: int
    price_per_hour: float  # USD per hour of the instance one replica occupies (cost per million tokens)
    requests_per_minute: float  # what one replica sustains at the SLO (the benchmark Job's figure): cost routing
    queue_target: float  # requests waiting in vLLM per pod that KEDA aims for
    cpu: float
    memory_gi: int
    startup_timeout_s: int  # loading the weights (and, on Neuron, the compiled artifacts) before the first answer

    @property
    def neuron_cores(self) -> int:
        """NeuronCores the pod asks for (Neuron only): its tensor parallel degree."""
        return self.tensor_parallel


@dataclass(frozen=True)
class LlmConfig:
    """Everything the stacks read to serve one language model on the enabled accelerators."""

    preset: str | None  # the catalog preset in use (None: a model outside the catalog, every fact set explicitly)
    model_id: str
    model_revision: str | None
    served_model_name: str  # the `model` clients send; one name on every accelerator
    attention_heads: int
    kv_heads: int
    model_size_gi: int  # the weights as staged, for the volumes that hold them
    tool_call_parser: str | None  # vLLM --tool-call-parser for tool_choice "auto" (None: llmToolCallParser = none)
    max_model_len: int  # prompt + output tokens per sequence (vLLM --max-model-len)
    max_num_seqs: int  # sequences batched at once (vLLM --max-num-seqs; on Neuron the compiled batch size)
    gateway_max_concurrent: int  # the gateway's bound: beyond it a 429
    kv_cache_target_percent: float  # KEDA's KV-cache trigger
    neuron_compile_timeout_s: int
    alarm_ttft_p90_ms: float  # alarmTtftP90Ms: the alarm on each LLM deployment unit's p90 time to first token
    benchmark_input_tokens: int  # the benchmark Job's prompt length
    benchmark_output_tokens: int  # ... and answer length (both within llmMaxModelLen)
    benchmark_timeout_s: int  # the benchmark Job's deadline
    per_accelerator: Mapping[str, LlmAccelerator]
    router: str | None = None  # llmRouter: the router's policy in front of each pool (None: off)

    @property
    def neuron_devices(self) -> int:
        """Neuron chips one LLM replica asks for (0 when Neuron does not serve it)."""
        per = self.per_accelerator.get("neuron")
        return per.devices if per is not None else 0

    @property
    def accelerators(self) -> tuple[str, ...]:
        """The accelerators that serve the model."""
        return tuple(self.per_accelerator)

    @classmethod
    def from_context(
        cls,
        values: Mapping[str, Any],
        accelerators: Sequence[str] = tuple(ACCELERATORS),
        instance_families: Mapping[str, Sequence[str]] | None = None,
        node_instance_types: Mapping[str, Sequence[str]] | None = None,
    ) -> LlmConfig | None:
        """The LLM settings, or None when `llmEnabled` is false (then no other llm* key is read).

        `instance_families`: per accelerator, the families its node pool may launch (the platform's
        `<acc>InstanceFamilies`), to check that a replica fits on the largest of them and that its
        `llmInstanceType<Acc>` may be launched at all. `node_instance_types`: per accelerator, the only types its
        nodes can be (managed node groups); None where Karpenter launches whatever the pods ask for.
        """
        if not Context(values).boolean(ENABLED_KEY, False):
            return None
        merged, preset = with_preset(values, accelerators)
        ctx = Context(merged)
        if preset is not None:
            require_hub_token(
                merged, catalog="LLM", preset=preset.name, model_id=preset.model_id.value, gated=preset.gated.value
            )
        attention_heads = ctx.integer("llmModelAttentionHeads", minimum=1, maximum=1024)
        kv_heads = ctx.integer("llmModelKvHeads", minimum=1, maximum=1024)
        if attention_heads % kv_heads:
            raise ConfigError(
                f"setting 'llmModelKvHeads' = {kv_heads} does not divide 'llmModelAttentionHeads' = "
                f"{attention_heads}: copy both from the model's config.json (num_key_value_heads, num_attention_heads)"
            )
        max_num_seqs = ctx.integer("llmMaxNumSeqs", minimum=1, maximum=1024)
        per_acc = {
            name: _read_accelerator(
                ctx,
                name,
                attention_heads,
                kv_heads,
                (instance_families or {}).get(name),
                (node_instance_types or {}).get(name),
            )
            for name in accelerators
        }
        revision = ctx.raw("llmModelRevision", "")
        parser = ctx.string("llmToolCallParser", pattern=_TOOL_PARSER, description="a vLLM tool parser name, or none")
        cfg = cls(
            preset=preset.name if preset is not None else None,
            model_id=ctx.string("llmModelId", pattern=_HUB_ID, description="a Hugging Face Hub id such as org/name"),
            model_revision=None
            if revision == ""
            else ctx.string(
                "llmModelRevision", pattern=_HUB_REVISION, description="a Hub commit, branch or tag (or empty for main)"
            ),
            served_model_name=ctx.string(
                "llmServedModelName", pattern=_SERVED_NAME, description="letters, digits and . _ : - (at most 128)"
            ),
            attention_heads=attention_heads,
            kv_heads=kv_heads,
            model_size_gi=ctx.integer("llmModelSizeGi", minimum=1, maximum=2000),
            tool_call_parser=None if parser == NO_TOOL_PARSER else parser,
            max_model_len=ctx.integer("llmMaxModelLen", minimum=128, maximum=1_048_576),
            max_num_seqs=max_num_seqs,
            gateway_max_concurrent=ctx.integer("llmGatewayMaxConcurrentRequests", minimum=1, maximum=10000),
            kv_cache_target_percent=ctx.number("llmScalingKvCacheTargetPercent", minimum=1, maximum=100),
            neuron_compile_timeout_s=ctx.integer("llmNeuronCompileTimeoutSeconds", minimum=300, maximum=86400),
            alarm_ttft_p90_ms=ctx.number(TTFT_ALARM_KEY, minimum=1, maximum=3_600_000),
            benchmark_input_tokens=ctx.integer("llmBenchmarkInputTokens", minimum=1, maximum=1_048_576),
            benchmark_output_tokens=ctx.integer("llmBenchmarkOutputTokens", minimum=2, maximum=1_048_576),
            benchmark_timeout_s=ctx.integer("llmBenchmarkTimeoutSeconds", minimum=300, maximum=86400),
            per_accelerator=per_acc,
            router=_read_router(ctx, accelerators),
        )
        shape = cfg.benchmark_input_tokens + cfg.benchmark_output_tokens
        if shape > cfg.max_model_len:
            raise ConfigError(
                f"settings 'llmBenchmarkInputTokens' + 'llmBenchmarkOutputTokens' = {shape} exceed 'llmMaxModelLen' "
                f"= {cfg.max_model_len}: the engine would refuse every benchmark request"
            )
        if cfg.gateway_max_concurrent < cfg.max_num_seqs:
            raise ConfigError(
                f"setting 'llmGatewayMaxConcurrentRequests' = {cfg.gateway_max_concurrent} is below 'llmMaxNumSeqs' "
                f"= {cfg.max_num_seqs}: the gateway would refuse requests the engine has room for"
            )
        return cfg


def _read_router(ctx: Context, accelerators: Sequence[str]) -> str | None:
    """`llmRouter`: off (the default), or the router's policy; a policy no enabled pool can serve stops the synth."""
    value = ctx.string(ROUTER_KEY, ROUTER_OFF, allowed=(ROUTER_OFF, *ROUTER_POLICIES))
    if value == ROUTER_OFF:
        return None
    blocked = [acc for acc in accelerators if acc in CACHE_AWARE_BLOCKERS]
    if value == "cache_aware" and blocked:
        reasons = "; ".join(f"{acc}: {CACHE_AWARE_BLOCKERS[acc]}" for acc in blocked)
        raise ConfigError(
            f"setting '{ROUTER_KEY}' = 'cache_aware' cannot serve these pools ({reasons}): use 'power_of_two' "
            "(docs/llm-serving.md, 'In-pool routing')"
        )
    return str(value)


def _read_instance(
    ctx: Context, name: str, families: Sequence[str] | None, node_types: Sequence[str] | None
) -> InstanceType:
    """`llmInstanceType<Acc>`: a type of cdk/instance_types.py that this accelerator's nodes can be."""
    return read_instance_type(ctx, f"llmInstanceType{_suffix(name)}", name, families, node_types)


def _read_accelerator(
    ctx: Context,
    name: str,
    attention_heads: int,
    kv_heads: int,
    families: Sequence[str] | None,
    node_types: Sequence[str] | None,
) -> LlmAccelerator:
    s = _suffix(name)
    tp_key = f"llmTensorParallel{s}"
    instance = _read_instance(ctx, name, families, node_types)
    tp = ctx.integer(tp_key, minimum=1, maximum=64)
    if attention_heads % tp:
        raise ConfigError(
            f"setting '{tp_key}' = {tp} does not divide 'llmModelAttentionHeads' = {attention_heads}: "
            "each NeuronCore or GPU must hold whole attention heads"
        )
    if kv_heads % tp and tp % kv_heads:
        raise ConfigError(
            f"setting '{tp_key}' = {tp} neither divides nor is a multiple of 'llmModelKvHeads' = {kv_heads}: "
            "the KV heads can be neither split nor replicated evenly"
        )
    devices = tp
    if name == "neuron":
        unknown = [family for family in families or () if family not in NEURON_CORES_PER_DEVICE]
        if unknown:
            raise ConfigError(
                f"setting 'neuronInstanceFamilies' includes {', '.join(unknown)}: LLM serving on Neuron runs on "
                f"{', '.join(NEURON_CORES_PER_DEVICE)} (the vLLM Neuron image pinned in cdk/versions.py)"
            )
        cores_per_device = max(NEURON_CORES_PER_DEVICE[f] for f in families or NEURON_CORES_PER_DEVICE)
        devices = math.ceil(tp / cores_per_device)
    if families:
        largest = max(MAX_DEVICES_PER_FAMILY.get(family, 0) for family in families)
        if devices > largest:
            unit = "Neuron chips" if name == "neuron" else "GPUs"
            raise ConfigError(
                f"setting '{tp_key}' = {tp} needs {devices} {unit} per replica, more than the largest instance of "
                f"'{name}InstanceFamilies' ({', '.join(families)}) has ({largest})"
            )
    # The instance the replica is priced at must hold it: its NeuronCores (Neuron) or GPUs (NVIDIA).
    units, unit = (instance.neuron_cores, "NeuronCores") if name == "neuron" else (instance.devices, "GPUs")
    if tp > units:
        raise ConfigError(
            f"setting '{tp_key}' = {tp} needs {tp} {unit}, more than 'llmInstanceType{s}' = {instance.name!r} has "
            f"({units})"
        )
    min_r = ctx.integer(f"llmMinReplicas{s}", minimum=1, maximum=100)
    max_r = ctx.integer(f"llmMaxReplicas{s}", minimum=1, maximum=100)
    if max_r < min_r:
        raise ConfigError(f"setting 'llmMaxReplicas{s}' = {max_r} is below 'llmMinReplicas{s}' = {min_r}")
    return LlmAccelerator(
        accelerator=name,
        instance=instance,
        tensor_parallel=tp,
        devices=devices,
        min_replicas=min_r,
        max_replicas=max_r,
        # The instance's own price unless set: Spot, another region or a negotiated rate.
        price_per_hour=ctx.number(f"llmPricePerHour{s}", instance.usd_per_hour, minimum=0.0001),
        requests_per_minute=ctx.number(requests_per_minute_key(name), minimum=0.01),
        queue_target=ctx.number(f"llmScalingQueueTarget{s}", minimum=0.1),
        cpu=ctx.number(f"llmCpu{s}", minimum=0.5),
        memory_gi=ctx.integer(f"llmMemoryGi{s}", minimum=2),
        startup_timeout_s=ctx.integer(f"llmStartupTimeoutSeconds{s}", minimum=30, maximum=7200),
    )
