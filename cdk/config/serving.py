"""Deploy-time settings of the serving side, read from CDK context through `Context`.

Every key is flat camelCase with a prefix naming its area (routing*, serving*, cost*, scaling*,
ingress*, alarm*, modelStore*, neuronCompile*, jobs*). Their values are written once, in `cdk.json`
(docs/serving.md explains each); only routingWeight*, ingressCertificateArn, ingressDomainName,
authDomainPrefix, alarmTopicArn, servingHubTokenSecretName and costPricePerHour* (unset: the price of
servingInstanceType*) are optional. The front door's keys
(ingressFrontDoor, ingressInternetFacing, ingressCertificateArn, ingressDomainName, auth*, waf*) are read
by `cdk/config/front_door.py`.
Per-accelerator keys end in the accelerator's name with a capital: `...Neuron`, `...Nvidia`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError, Context
from cdk.config.front_door import FrontDoorConfig
from cdk.config.instances import read_instance_type
from cdk.config.pool_capacity import PoolRoom
from cdk.image.families import FAMILIES as IMAGE_FAMILIES
from cdk.instance_types import InstanceType
from common.lora_keys import LoraSet, parse_lora_keys

RoutingMode = Literal["cost-with-failover", "cost", "capacity"]
ROUTING_MODES: Final = ("cost-with-failover", "cost", "capacity")
# The modes that split traffic with the weighted forward action (cost weights, moved by the
# routing controller in cost-with-failover).
WEIGHTED_MODES: Final = ("cost-with-failover", "cost")
# The AWS Load Balancer Controller accepts forward weights 0..999.
MAX_ROUTING_WEIGHT: Final = 999
# Full copies of the model the Neuron compile Job holds on its scratch volume at once: the weights it
# downloads, optimum-neuron's export (the compiled models, weights inlined), the compiler's work files
# (the traced graph with the weights as constants, and the NEFF built from it) and the published artifacts.
COMPILE_SCRATCH_MODEL_COPIES: Final = 5
# NeuronCores per Inferentia2 device (awsdocs-neuron general/arch/neuron-hardware/inferentia2: "2x NeuronCore-v2").
NEURON_CORES_PER_DEVICE: Final = 2
# Inferentia2: "32GiB of high-bandwidth device memory (HBM)" per chip of two NeuronCore-v2 (awsdocs-neuron v2.29.1
# about-neuron/arch/neuron-hardware/inferentia2.rst), so 16 GiB a core.
NEURON_CORE_MEMORY_GB: Final = 16
_SHAPE = r"([0-9]{2,4})x([0-9]{2,4})"

_TOPIC_ARN = r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}"
# A Hub commit, branch or tag (git ref characters; no spaces, no "..").
_HUB_REVISION = r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,199}"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_LB_NAME = r"[A-Za-z0-9]([A-Za-z0-9-]{0,30}[A-Za-z0-9])?"
# A secret name (letters, digits, /_+=.@-) or a secret ARN.
_SM_ID = (
    r"[A-Za-z0-9/_+=.@-]{1,512}"
    r"|arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+"
)


def _suffix(accelerator: str) -> str:
    return accelerator[0].upper() + accelerator[1:]


@dataclass(frozen=True)
class AcceleratorServing:
    """Settings that differ per accelerator."""

    instance: InstanceType  # servingInstanceType<Acc>: the type one pod is pinned to and priced at
    price_per_hour: float  # USD per instance hour (one pod per instance): costPricePerHour<Acc>, or the instance's
    seconds_per_image: float  # measured with the service's benchmark
    routing_weight: int | None  # explicit weight, or None to derive it from cost
    min_replicas: int
    max_replicas: int
    scaling_target: float  # requests per minute one pod sustains before latency breaks
    startup_timeout_s: int  # model load budget for the startupProbe
    cpu: float
    memory_gi: int
    async_only: bool = False  # serves jobs only: no interactive traffic, may scale to zero
    jobs_target: int = 8  # jobs waiting (or running) per pod that KEDA's SQS trigger aims for


@dataclass(frozen=True)
class NeuronCompile:
    """The static shapes the Neuron compile job builds for (one pod serves them all), and how long it may take."""

    instance: InstanceType  # neuronCompileInstanceType: the type the compile pod is pinned to
    batch_size: int
    shapes: tuple[tuple[int, int], ...]  # (width, height); the first is the family's square native size
    tensor_parallel_size: int  # NeuronCores the pipeline is sharded over (2 per Inferentia2 device)
    timeout_s: int
    cpu: float  # the compile pod's requests: large enough that only a node fit to compile takes it
    memory_gi: int
    scratch_gi: int  # its scratch volume: the weights, the export, the compiler's files, the artifacts
    loras: LoraSet = ()  # neuronCompileLoras: the LoRA adapters fused into the compiled weights, with their scales

    @property
    def devices(self) -> int:
        """Neuron devices the tensor parallel degree takes (two NeuronCores per Inferentia2 device)."""
        return -(-self.tensor_parallel_size // NEURON_CORES_PER_DEVICE)

    @property
    def shape_names(self) -> tuple[str, ...]:
        """`WxH` per shape, as the compile's `--shape` and the pods' NEURON_SHAPES name them."""
        return tuple(f"{w}x{h}" for w, h in self.shapes)


@dataclass(frozen=True)
class RoutingControllerConfig:
    """routing*: how often the controller looks, how long a change must hold, and when to alarm."""

    period_s: int  # routingPeriodSeconds
    hold_s: int  # routingHoldSeconds: a rise or a one-pod cut waits this long
    band_pods: int  # routingBandPods: a cut of at most this many pods waits routingHoldSeconds
    zero_weight_alarm_minutes: int  # routingZeroWeightAlarmMinutes


@dataclass(frozen=True)
class JobsConfig:
    """The asynchronous jobs' queue, results and the pods' share of the work (jobs* keys)."""

    max_receives: int  # attempts before a job is failed and dead-lettered (the queue's maxReceiveCount)
    visibility_s: int  # how long a taken job stays hidden; the worker extends it while the job runs
    concurrency: int  # jobs one pod holds at once
    result_retention_days: int  # records and images expire after this many days
    image_url_s: int  # lifetime of a presigned image URL
    alarm_oldest_age_s: int  # alarm when the oldest waiting job is older than this


@dataclass(frozen=True)
class ServingConfig:
    """Everything the serving and observability stacks read from context."""

    routing_mode: RoutingMode
    per_accelerator: Mapping[str, AcceleratorServing]  # the enabled accelerators only
    namespace: str
    image_model: str  # the catalog preset (cdk/image/presets.py); empty for a model outside the catalog
    family: str  # imageModelFamily: a family of cdk/image/families.py
    model_id: str
    model_revision: str | None  # the Hub commit staged; None: the repository's main branch
    metrics_mode: str
    max_batch_size: int
    batch_wait_ms: float
    queue_size: int
    request_timeout_s: int
    shutdown_grace_s: int
    pre_stop_s: int
    neuron_devices: int
    model_size_gi: int  # the model's weights as staged (diffusers layout, one weight format)
    cache_size_gi: int
    shm_size_gi: int
    run_as_user: int
    scaling_polling_s: int
    scaling_cooldown_s: int
    load_balancer_name: str
    front_door: FrontDoorConfig
    allowed_cidrs: tuple[str, ...]
    idle_timeout_s: int
    deregistration_delay_s: int
    access_logs: bool
    alarm_latency_p99_ms: float
    alarm_5xx_rate_percent: float
    alarm_evaluation_periods: int
    alarm_topic_arn: str | None
    model_store_retain: bool
    neuron_compile: NeuronCompile | None  # None when Neuron is not enabled
    stage_weights: bool  # copy a Hub model id into the model store during the deploy
    hub_token_secret: str | None  # Secrets Manager secret (name or ARN) holding a Hub token; never the token
    # The starting gate fronts the image pool (docs/trial.md): it answers "starting" while no pod is ready and
    # publishes the demand that scales the pool from zero, so an interactive pool may have no pod at rest.
    starting_gate: bool

    @property
    def stages_weights(self) -> bool:
        """True when the deploy copies the model from the Hub (not for s3:// ids, which are read where they are)."""
        from common.model_store.layout import is_s3_uri

        return self.stage_weights and not is_s3_uri(self.model_id)

    @property
    def model_name(self) -> str:
        """The image model's name in the API (MODEL_NAME on every image pod, whose MODEL_ID differs per accelerator;
        the LLM gateway's IMAGE_MODELS): the Hub id, or for weights brought as s3:// the preset they are."""
        from common.model_store.layout import is_s3_uri

        return self.image_model if is_s3_uri(self.model_id) else self.model_id

    routing_controller: RoutingControllerConfig
    jobs: JobsConfig
    # Each accelerated pool's room at its maximum replicas (cdk/config/pool_capacity.py): AppConfig sets it from the
    # platform's limits; empty where only the serving settings were read.
    pool_rooms: Mapping[str, PoolRoom] = field(default_factory=dict)

    @property
    def runs_routing_controller(self) -> bool:
        """cost-with-failover: the routing controller moves weight to the accelerators with ready pods (the
        starting gate's one pool has none to move)."""
        return self.routing_mode == "cost-with-failover" and not self.starting_gate

    @property
    def compile_settings(self) -> NeuronCompile:
        """The neuronCompile* settings, for code that runs only with Neuron enabled."""
        if self.neuron_compile is None:
            raise ValueError("Neuron is not enabled: there is nothing to compile")
        return self.neuron_compile

    @property
    def termination_grace_s(self) -> int:
        """preStop delay + the service's own drain + a margin for process exit."""
        return self.pre_stop_s + self.shutdown_grace_s + 5

    @classmethod
    def from_context(
        cls,
        values: Mapping[str, Any],
        accelerators: Sequence[str] = tuple(ACCELERATORS),
        instance_families: Mapping[str, Sequence[str]] | None = None,
        node_instance_types: Mapping[str, Sequence[str]] | None = None,
    ) -> ServingConfig:
        """Read and check the serving settings of the enabled `accelerators`; a bad value raises
        ConfigError naming its key, and a disabled accelerator's settings are not read at all.
        `instance_families` and `node_instance_types`: as LlmConfig.from_context takes them, to check that each
        `servingInstanceType<Acc>` (and `neuronCompileInstanceType`) can be launched."""
        ctx = Context(values)
        families = instance_families or {}
        node_types = node_instance_types or {}
        per_acc: dict[str, AcceleratorServing] = {}
        for name in accelerators:
            s = _suffix(name)
            weight_key = f"routingWeight{s}"
            weight = (
                ctx.integer(weight_key, minimum=0, maximum=MAX_ROUTING_WEIGHT)
                if values.get(weight_key) is not None
                else None
            )
            min_r = ctx.integer(f"scalingMinReplicas{s}", minimum=0, maximum=100)
            max_r = ctx.integer(f"scalingMaxReplicas{s}", minimum=1, maximum=100)
            if max_r < min_r:
                raise ConfigError(
                    f"setting 'scalingMaxReplicas{s}' = {max_r} is below 'scalingMinReplicas{s}' = {min_r}"
                )
            instance = read_instance_type(
                ctx, f"servingInstanceType{s}", name, families.get(name), node_types.get(name)
            )
            price_key = f"costPricePerHour{s}"
            per_acc[name] = AcceleratorServing(
                instance=instance,
                # Unset: the price of the instance the pod is pinned to (cdk/instance_types.py).
                price_per_hour=ctx.number(price_key, minimum=0.0001)
                if values.get(price_key) is not None
                else instance.usd_per_hour,
                seconds_per_image=ctx.number(f"costSecondsPerImage{s}", minimum=0.001),
                routing_weight=weight,
                min_replicas=min_r,
                max_replicas=max_r,
                scaling_target=ctx.number(f"scalingTarget{s}", minimum=0.1),
                startup_timeout_s=ctx.integer(f"servingStartupTimeoutSeconds{s}", minimum=30, maximum=7200),
                cpu=ctx.number(f"servingCpu{s}", minimum=0.25),
                memory_gi=ctx.integer(f"servingMemoryGi{s}", minimum=1),
                async_only=ctx.boolean(f"servingAsyncOnly{s}"),
                jobs_target=ctx.integer(f"scalingJobsTarget{s}", minimum=1, maximum=10000),
            )
            if min_r == 0 and not per_acc[name].async_only and not ctx.boolean("servingStartingGate"):
                raise ConfigError(
                    f"setting 'scalingMinReplicas{s}' = 0 needs 'servingAsyncOnly{s}' = true or "
                    "'servingStartingGate' = true: with no pod and no gate, no interactive request could arrive to "
                    "scale it up"
                )
        explicit = [a for a, v in per_acc.items() if v.routing_weight is not None]
        if explicit and len(explicit) != len(per_acc):
            missing = sorted(set(per_acc) - set(explicit))
            raise ConfigError(
                "setting 'routingWeight" + _suffix(missing[0]) + "' is required when any routingWeight* is set"
            )

        cfg = cls(
            routing_mode=ctx.string("routingMode", allowed=ROUTING_MODES),
            per_accelerator=per_acc,
            namespace=ctx.string("servingNamespace", pattern=_DNS_LABEL, description="a DNS label"),
            image_model=ctx.string("imageModel", ""),
            family=ctx.string("imageModelFamily", allowed=tuple(IMAGE_FAMILIES)),
            model_id=ctx.string("servingModelId"),
            model_revision=_read_model_revision(ctx),
            metrics_mode=ctx.string("servingMetricsMode", allowed=("cloudwatch", "emf")),
            max_batch_size=ctx.integer("servingMaxBatchSize", minimum=1, maximum=64),
            batch_wait_ms=ctx.number("servingBatchWaitMs", minimum=0, maximum=10000),
            queue_size=ctx.integer("servingQueueSize", minimum=1, maximum=10000),
            request_timeout_s=ctx.integer("servingRequestTimeoutSeconds", minimum=1, maximum=3600),
            shutdown_grace_s=ctx.integer("servingShutdownGraceSeconds", minimum=0, maximum=600),
            pre_stop_s=ctx.integer("servingPreStopSeconds", minimum=0, maximum=120),
            neuron_devices=ctx.integer("servingNeuronDevices", minimum=1, maximum=16),
            model_size_gi=ctx.integer("servingModelSizeGi", minimum=1, maximum=1000),
            cache_size_gi=ctx.integer("servingCacheSizeGi", minimum=1),
            shm_size_gi=ctx.integer("servingShmSizeGi", minimum=1),
            run_as_user=ctx.integer("servingRunAsUser", minimum=1),
            scaling_polling_s=ctx.integer("scalingPollingSeconds", minimum=5, maximum=600),
            scaling_cooldown_s=ctx.integer("scalingCooldownSeconds", minimum=30, maximum=3600),
            load_balancer_name=ctx.string(
                "ingressLoadBalancerName", pattern=_LB_NAME, description="1-32 letters, digits, hyphens"
            ),
            front_door=FrontDoorConfig.from_context(ctx),
            allowed_cidrs=tuple(ctx.cidr_list("ingressAllowedCidrs", allow_empty=True)),
            idle_timeout_s=ctx.integer("ingressIdleTimeoutSeconds", minimum=1, maximum=4000),
            deregistration_delay_s=ctx.integer("ingressDeregistrationDelaySeconds", minimum=0, maximum=3600),
            access_logs=ctx.boolean("ingressAccessLogs"),
            alarm_latency_p99_ms=ctx.number("alarmLatencyP99Ms", minimum=1),
            alarm_5xx_rate_percent=ctx.number("alarm5xxRatePercent", minimum=0.01, maximum=100),
            alarm_evaluation_periods=ctx.integer("alarmEvaluationPeriods", minimum=1, maximum=60),
            alarm_topic_arn=ctx.string("alarmTopicArn", None, pattern=_TOPIC_ARN, description="an SNS topic ARN"),
            model_store_retain=ctx.string("modelStoreRemovalPolicy", allowed=("retain", "destroy")) == "retain",
            # Not held against managed node groups' types: their inf2.xlarge never took the compile pod (16 vCPU),
            # a gap this check would only move to the synth.
            neuron_compile=_read_neuron_compile(ctx, families.get("neuron")) if "neuron" in accelerators else None,
            stage_weights=ctx.boolean("servingStageWeights"),
            hub_token_secret=ctx.string(
                "servingHubTokenSecretName",
                None,
                pattern=_SM_ID,
                description="a Secrets Manager secret name or ARN (the secret holds the token, never the key)",
            ),
            starting_gate=ctx.boolean("servingStartingGate"),
            routing_controller=_read_routing_controller(ctx),
            jobs=_read_jobs(ctx),
        )
        cfg._check_consistency()
        return cfg

    def _check_consistency(self) -> None:
        if self.hub_token_secret and self.hub_token_secret.startswith("hf_"):
            raise ConfigError(
                "setting 'servingHubTokenSecretName' looks like a Hub token: store the token in Secrets Manager "
                "and give the secret's name here (the token must not be in context or the template)"
            )
        self.front_door.check_timeouts(self.request_timeout_s)
        self.front_door.check_default_prefix(self.load_balancer_name)
        if self.idle_timeout_s < self.request_timeout_s:
            raise ConfigError(
                f"setting 'ingressIdleTimeoutSeconds' = {self.idle_timeout_s} is below "
                f"'servingRequestTimeoutSeconds' = {self.request_timeout_s}: the ALB would cut generations off"
            )
        if self.deregistration_delay_s > self.termination_grace_s:
            raise ConfigError(
                f"setting 'ingressDeregistrationDelaySeconds' = {self.deregistration_delay_s} is above the pod's "
                f"termination grace ({self.termination_grace_s} s = servingPreStopSeconds + "
                "servingShutdownGraceSeconds + 5): the ALB would keep sending to a pod that is gone"
            )
        self._check_async_only()
        self._check_starting_gate()
        if self.neuron_compile is not None and self.neuron_devices < self.neuron_compile.devices:
            raise ConfigError(
                f"setting 'servingNeuronDevices' = {self.neuron_devices} is below the "
                f"{self.neuron_compile.devices} devices of 'neuronCompileTensorParallelSize' = "
                f"{self.neuron_compile.tensor_parallel_size}: the pods could not load the sharded model"
            )
        self._check_neuron_device_memory()
        self._check_volume_sizes()
        try:
            from common.model_store.layout import is_s3_uri, model_slug, split_s3_uri

            split_s3_uri(self.model_id) if is_s3_uri(self.model_id) else model_slug(self.model_id)
        except ValueError as exc:
            raise ConfigError(f"setting 'servingModelId' = {self.model_id!r} is invalid: {exc}") from None

    def _check_neuron_device_memory(self) -> None:
        """Stop a shape list whose pipelines cannot all fit the NeuronCores they load onto (one whole pipeline
        per size: docs/serving.md "Several sizes per Neuron pod")."""
        plan = self.neuron_compile
        if plan is None:
            return
        per_size = IMAGE_FAMILIES[self.family].neuron_gb_per_size_at_least
        if per_size is None:
            raise ConfigError(
                f"setting 'accelerators' includes neuron, but optimum-neuron 0.4.5 has no pipeline for the "
                f"'{self.family}' family (imageModelFamily): serve it on NVIDIA (-c accelerators=nvidia)"
            )
        # Unsharded (SD, SDXL), optimum-neuron 0.4.5 loads every size onto the first device's two cores; sharded
        # (Flux), each size is spread over the degree's cores.
        cores = max(plan.tensor_parallel_size, NEURON_CORES_PER_DEVICE)
        available = cores * NEURON_CORE_MEMORY_GB
        needed = len(plan.shapes) * per_size
        if needed > available:
            raise ConfigError(
                f"setting 'neuronCompileShapes' lists {len(plan.shapes)} sizes: a {self.family} pipeline per size "
                f"takes at least {per_size:g} GB of Neuron device memory, "
                f"{needed:g} GB in all, over the {available:g} GB of the {cores} NeuronCores it loads onto "
                "(list fewer sizes, or raise 'neuronCompileTensorParallelSize' where the family shards)"
            )

    def _check_volume_sizes(self) -> None:
        """The pods' cache volume holds what they download (the weights; on Neuron, every served size's compiled
        pipeline); the compile Job's scratch several copies of the weights."""
        if self.cache_size_gi < self.model_size_gi:
            raise ConfigError(
                f"setting 'servingCacheSizeGi' = {self.cache_size_gi} is below 'servingModelSizeGi' = "
                f"{self.model_size_gi}: the pods download the model into their cache volume"
            )
        plan = self.neuron_compile
        per_size = IMAGE_FAMILIES[self.family].neuron_gb_per_size_at_least
        if plan is not None and per_size is not None:
            # Each size's folder carries a whole pipeline with its weights (docs/serving.md "Several sizes per
            # Neuron pod"); a volume over its sizeLimit gets the pod evicted, and the next one fetches again.
            needed_gi = math.ceil(len(plan.shapes) * per_size * 1e9 / 2**30)
            if self.cache_size_gi < needed_gi:
                raise ConfigError(
                    f"setting 'servingCacheSizeGi' = {self.cache_size_gi} cannot hold the {len(plan.shapes)} "
                    f"compiled sizes of 'neuronCompileShapes' the Neuron pods download (at least {per_size:g} GB "
                    f"each for a {self.family} pipeline): set it to at least {needed_gi}, or list fewer sizes"
                )
        needed = COMPILE_SCRATCH_MODEL_COPIES * self.model_size_gi
        if self.neuron_compile is not None and self.neuron_compile.scratch_gi < needed:
            raise ConfigError(
                f"setting 'neuronCompileScratchGi' = {self.neuron_compile.scratch_gi} is too small for "
                f"'servingModelSizeGi' = {self.model_size_gi}: the compile Job holds {COMPILE_SCRATCH_MODEL_COPIES} "
                "copies of the model on it (weights, export, the compiler's files, artifacts); "
                f"set it to at least {needed}"
            )

    def _check_starting_gate(self) -> None:
        """The gate proxies to one pool's Service: one interactive accelerator, weighted routing."""
        if not self.starting_gate:
            return
        if len(self.per_accelerator) != 1:
            raise ConfigError(
                "setting 'servingStartingGate' = true needs exactly one accelerator (such as -c accelerators=nvidia): "
                "the gate fronts one pool"
            )
        if self.routing_mode == "capacity":
            raise ConfigError("setting 'servingStartingGate' = true does not work with 'routingMode' = capacity")

    def _check_async_only(self) -> None:
        """Someone must take interactive traffic (and job submissions); only cost routing can leave a pool out."""
        async_only = sorted(name for name, per in self.per_accelerator.items() if per.async_only)
        if not async_only:
            return
        if len(async_only) == len(self.per_accelerator):
            raise ConfigError(
                f"setting 'servingAsyncOnly{_suffix(async_only[0])}' = true leaves no accelerator for "
                "interactive requests and job submissions: keep at least one enabled accelerator interactive"
            )
        if self.routing_mode == "capacity":
            raise ConfigError(
                f"setting 'servingAsyncOnly{_suffix(async_only[0])}' = true does not work with 'routingMode' = "
                "capacity, which sends requests to every pod: use weighted routing"
            )


def _read_jobs(ctx: Context) -> JobsConfig:
    """jobs*: the SQS redrive count and visibility, per-pod concurrency, result retention, URL lifetime."""
    return JobsConfig(
        # SQS accepts maxReceiveCount 1..1000 and a visibility timeout of 0..43200 s (SQS API reference).
        max_receives=ctx.integer("jobsMaxReceives", minimum=1, maximum=1000),
        visibility_s=ctx.integer("jobsVisibilitySeconds", minimum=10, maximum=43200),
        concurrency=ctx.integer("jobsConcurrency", minimum=1, maximum=10),
        result_retention_days=ctx.integer("jobsResultRetentionDays", minimum=1, maximum=3650),
        # A presigned URL lives no longer than the pod's role session, so keep it within an hour.
        image_url_s=ctx.integer("jobsImageUrlSeconds", minimum=60, maximum=3600),
        alarm_oldest_age_s=ctx.integer("alarmJobAgeSeconds", minimum=60, maximum=1209600),
    )


def _read_routing_controller(ctx: Context) -> RoutingControllerConfig:
    """routingPeriodSeconds, routingHoldSeconds, routingBandPods, routingZeroWeightAlarmMinutes."""
    cfg = RoutingControllerConfig(
        period_s=ctx.integer("routingPeriodSeconds", minimum=5, maximum=300),
        hold_s=ctx.integer("routingHoldSeconds", minimum=0, maximum=3600),
        band_pods=ctx.integer("routingBandPods", minimum=0, maximum=10),
        zero_weight_alarm_minutes=ctx.integer("routingZeroWeightAlarmMinutes", minimum=1, maximum=1440),
    )
    if cfg.hold_s and cfg.hold_s < cfg.period_s:
        raise ConfigError(
            f"setting 'routingHoldSeconds' = {cfg.hold_s} is below 'routingPeriodSeconds' = {cfg.period_s}: "
            "a change could not be seen holding"
        )
    return cfg


def _read_model_revision(ctx: Context) -> str | None:
    """`servingModelRevision`: the Hub commit to stage; empty or absent means the main branch."""
    if ctx.raw("servingModelRevision", "") == "":
        return None
    return ctx.string(
        "servingModelRevision", pattern=_HUB_REVISION, description="a Hub commit, branch or tag (or empty for main)"
    )


def _read_neuron_compile(ctx: Context, families: Sequence[str] | None) -> NeuronCompile:
    """neuronCompile*: the compiled static shapes (sides a multiple of 8), the degree and the job's deadline."""
    for old in ("neuronCompileWidth", "neuronCompileHeight"):
        if ctx.raw(old, None) is not None:
            raise ConfigError(
                f"setting '{old}' is no longer read: give the compiled sizes as 'neuronCompileShapes' "
                "(a list of WxH, such as 1024x1024,896x1152,1152x896; one pod serves every shape)"
            )
    shapes = tuple(_shape(name) for name in ctx.string_list("neuronCompileShapes"))
    degree = ctx.integer("neuronCompileTensorParallelSize", minimum=1, maximum=32)
    if degree > 1 and degree % NEURON_CORES_PER_DEVICE:
        raise ConfigError(
            f"setting 'neuronCompileTensorParallelSize' = {degree} is invalid: expected 1 or a multiple of "
            f"{NEURON_CORES_PER_DEVICE} (the NeuronCores of whole Inferentia2 devices)"
        )
    return NeuronCompile(
        instance=read_instance_type(ctx, "neuronCompileInstanceType", "neuron", families, None),
        batch_size=ctx.integer("neuronCompileBatchSize", minimum=1, maximum=64),
        shapes=shapes,
        tensor_parallel_size=degree,
        timeout_s=ctx.integer("neuronCompileTimeoutSeconds", minimum=300, maximum=86400),
        # Above an inf2.xlarge (4 vCPU, 16 GiB), where compiling SD 2.1 runs out of memory; optimum-neuron
        # recommends an inf2.8xlarge (32 vCPU, 128 GiB) or larger for compiling (docs/serving.md).
        cpu=ctx.number("neuronCompileCpu", minimum=4.5, maximum=190),
        memory_gi=ctx.integer("neuronCompileMemoryGi", minimum=17, maximum=760),
        scratch_gi=ctx.integer("neuronCompileScratchGi", minimum=1, maximum=10000),
        loras=_loras(ctx.string_list("neuronCompileLoras", allow_empty=True)),
    )


def _loras(items: Sequence[str]) -> LoraSet:
    """neuronCompileLoras (`name:scale` each) as a LoraSet; ConfigError naming the setting."""
    try:
        return parse_lora_keys(items)
    except ValueError as exc:
        raise ConfigError(f"setting 'neuronCompileLoras': {exc} (expected name:scale items, such as ink:0.8)") from None


def _shape(name: str) -> tuple[int, int]:
    """`WxH` -> (width, height), each side a multiple of 8 in 64..2048; ConfigError naming neuronCompileShapes."""
    match = re.fullmatch(_SHAPE, name)
    sides = (int(match.group(1)), int(match.group(2))) if match else None
    if sides is None or any(side < 64 or side > 2048 or side % 8 for side in sides):
        raise ConfigError(
            f"setting 'neuronCompileShapes' has {name!r}: expected WxH with each side a multiple of 8 in 64..2048"
        )
    return sides
