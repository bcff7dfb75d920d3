"""The image service's settings: one typed object read from environment variables.

Every field has a safe default for a laptop (`make run`), and the Kubernetes manifests set the
same variable names. What every service shares (network, HTTP bounds, drain, logs, metrics, token
sign-in) is common/settings.py's `ServiceSettings`, the browser's sign-in its `BrowserSignInSettings`;
`load_settings()` turns a bad value into one readable error that names the variable, instead of a traceback.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator

from common.http.body import BodyLimits
from common.lora_keys import LoraSet, parse_lora_keys
from common.model_store.layout import ImageSize, parse_sizes
from common.settings import BrowserSignInSettings, read_settings

Backend = Literal["auto", "neuron", "cuda", "cpu"]
CudaDtype = Literal["bf16", "fp16", "fp32"]
JobsMode = Literal["off", "local", "aws"]
CompileMode = Literal["off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]

MAX_SCHEDULE_STEPS = 999  # the largest MAX_STEPS (see max_steps)


class Settings(BrowserSignInSettings):
    """All run-time settings of the service; environment variable = field name in upper case."""

    # Where the model comes from and what runs it.
    model_id: str = Field(
        "builtin:tiny",
        description="builtin:tiny, a local diffusers directory, s3://bucket/prefix, or a Hugging Face repo id",
    )
    model_name: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="the model's name in the API (GET /v1/models, the `model` of /v1/images/generations); the "
        "deploy sets one name for every pod, whose MODEL_ID differs per accelerator. Unset: MODEL_ID's public name",
    )
    backend: Backend = Field("auto", description="auto picks neuron, then cuda, then cpu")
    model_cache_dir: Path = Field(
        Path.home() / ".cache" / "sd-on-eks", description="where built-in and downloaded models are kept"
    )

    # Bounds on a request (the HTTP ones are ServiceSettings').
    max_prompt_chars: int = Field(1000, ge=1, le=10000)
    default_steps: int | None = Field(None, ge=1, description="unset: the model family's default")
    # Stable Diffusion's schedules have 1,000 training timesteps and steps_offset 1, so a 1,000-step run
    # would index past the schedule (IndexError in DDIM and PNDM): 999 is the most they take.
    max_steps: int = Field(100, ge=1, le=MAX_SCHEDULE_STEPS)
    default_guidance_scale: float | None = Field(
        None, ge=0.0, description="unset: the model family's default (guidance-distilled families take none)"
    )
    max_guidance_scale: float = Field(30.0, gt=0.0)
    default_width: int | None = Field(None, ge=64, description="unset: the model's native size")
    default_height: int | None = Field(None, ge=64, description="unset: the model's native size")
    min_size: int = Field(64, ge=8)
    # The families' own bounds apply within these (SDXL's trained sizes reach 1536, Flux's 2048).
    max_size: int = Field(2048, ge=64, le=4096)

    # LoRA adapters (app/loras.py): one NAME.safetensors each, named per request; never a path or URL in a request.
    lora_dir: str | None = Field(
        None,
        min_length=1,
        description="a folder of LoRA adapters (NAME.safetensors), or an s3://bucket/prefix/ of the model store "
        "mirrored into MODEL_CACHE_DIR at start-up; unset: no adapters",
    )
    max_loras: int = Field(4, ge=1, le=16, description="the most adapters one request may name")
    max_loaded_loras: int = Field(
        8,
        ge=1,
        le=64,
        description="CPU/CUDA: adapters kept loaded; loading one more unloads the least recently used",
    )
    # diffusers' set_adapters takes any float weight (diffusers 0.42 loaders/lora_base.py); past about 2 an
    # adapter's delta swamps the model and the image turns to noise, so requests are bounded here.
    max_lora_scale: float = Field(
        2.0, gt=0.0, le=10.0, description="an adapter's scale must lie within -MAX_LORA_SCALE..MAX_LORA_SCALE"
    )

    # Image edits (app/edit_inputs.py): every upload is checked before it is decoded.
    max_upload_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="the largest image or mask file an edit takes (POST /v1/images/edits; /v1/generate's and the "
        "jobs' init_image and mask_image, within MAX_BODY_BYTES there); the edits route's body bound derives from it",
    )
    max_upload_pixels: int = Field(
        4096 * 4096,
        ge=64 * 64,
        le=8192 * 8192,
        description="the most pixels (width x height, read from the file's header) an uploaded image may "
        "declare: a decompression bomb is refused before it is decoded",
    )

    # Batching and back-pressure.
    max_batch_size: int = Field(4, ge=1, le=64)
    batch_wait_ms: float = Field(50.0, ge=0.0, le=10000.0)
    queue_size: int = Field(32, ge=1, le=10000, description="requests that may wait; more get a 429")
    request_timeout_s: float = Field(120.0, gt=0.0, description="a request waiting longer gets a 504")

    # Neuron: one compiled pipeline per image size, each in a <W>x<H>/ folder of MODEL_ID (neuron_compile.py).
    neuron_shapes: str | None = Field(
        None,
        description="the compiled sizes to serve, WxH,WxH,... (the first is the default size); unset: every "
        "complete size folder under MODEL_ID",
    )
    neuron_tensor_parallel_size: int | None = Field(
        None,
        ge=1,
        le=64,
        description="the NeuronCores each UNet/transformer was compiled to span; checked against "
        "the artifacts (unset: as compiled)",
    )
    neuron_batch_size: int = Field(
        1, ge=1, le=64, description="compiled batch size, when the artifacts do not state it"
    )
    neuron_loras: str | None = Field(
        None,
        description="the LoRA adapters fused into the compiled pipeline, name:scale,... (the compile's --lora): "
        "the only adapters, at those scales, a request may name on Neuron",
    )

    # CUDA speed switches; each can be turned off to measure its gain.
    cuda_dtype: CudaDtype = "bf16"
    cuda_channels_last: bool = True
    cuda_fuse_qkv: bool = True
    # Off by default: on an H100 (2026-11-27, docs/benchmarks.md) compiling even a narrow SD 2.1 copy for two
    # served shapes took over 4 minutes with max-autotune, and a pod compiles at start-up within its startupProbe.
    cuda_compile: CompileMode = Field(
        "off", description="torch.compile mode for UNet and VAE at start-up; raise the startup budget with it"
    )
    cuda_graphs: bool = False
    cuda_sdpa: bool = Field(True, description="scaled-dot-product attention (flash kernels); off: plain attention")
    cuda_inductor_tuning: bool = Field(
        True, description="with CUDA_COMPILE: 1x1 convolutions as matmuls, coordinate-descent tuning"
    )
    # Off by default: it changes the image a little (app/backends/step_cache.py's tolerance), where the other
    # switches keep it. Applies on the CPU too: diffusers' cache hooks are plain torch.
    cuda_step_cache: bool = Field(
        False,
        description="diffusers' first-block cache on the denoiser (FLUX.1-schnell, Qwen-Image; other families log "
        "why not): later blocks are skipped at a step whose first block changed little; not with CUDA_COMPILE",
    )
    # FirstBlockCacheConfig's default (diffusers 0.42.1, hooks/first_block_cache.py) is 0.05.
    cuda_step_cache_threshold: float = Field(
        0.05,
        gt=0.0,
        le=1.0,
        description="with CUDA_STEP_CACHE: the relative change of the first block's residual below which a step "
        "reuses the other blocks' last residual; higher skips more and changes the image more",
    )

    # Capacity planning: `python -m app.bench breaking-point` ramps load until p90 latency passes this.
    slo_p90_ms: float = Field(10000.0, gt=0.0, description="the p90 latency a deployment must stay under")

    # Asynchronous jobs (app/jobs): `local` keeps queue and results on disk; `aws` uses SQS, S3 and SNS.
    jobs: JobsMode = Field("local", description="off, local (embedded queue under JOBS_DIR) or aws")
    jobs_dir: Path | None = Field(None, description="local: queue, records, images; unset: MODEL_CACHE_DIR/jobs")
    jobs_queue_url: str | None = Field(None, description="aws: the SQS queue URL")
    jobs_bucket: str | None = Field(None, description="aws: the S3 bucket for records and images")
    jobs_prefix: str = Field("jobs/", pattern=r"^([A-Za-z0-9._-]+/)+$", description="aws: key prefix, ends in /")
    jobs_topic_arn: str | None = Field(None, description="aws: the SNS topic announcing finished jobs")
    jobs_dead_letter_url: str | None = Field(
        None, description="aws: the dead-letter queue's URL; jobs found there are failed and announced"
    )
    jobs_max_receives: int = Field(
        3,
        ge=1,
        le=1000,
        description="attempts before a job is failed (a job handed back at shutdown keeps its attempt)",
    )
    jobs_queue_max_receives: int = Field(
        100,
        ge=1,
        le=1000,
        description="deliveries of one job's message (hand-backs and crashes included) before the queue gives up on "
        "it; local: the embedded queue's limit, aws: the queue's maxReceiveCount (set by the stack)",
    )
    jobs_visibility_s: int = Field(
        60, ge=10, le=43200, description="how long a taken job stays hidden; extended while it runs"
    )
    jobs_concurrency: int = Field(4, ge=1, le=10, description="jobs one pod holds at once")
    jobs_poll_s: float = Field(10.0, ge=0.0, le=20.0, description="long-poll wait for new jobs")
    jobs_timeout_s: float = Field(
        3600.0,
        gt=0.0,
        le=86400.0,
        description="how long one attempt of a job may wait and run (REQUEST_TIMEOUT_S is for interactive requests)",
    )
    jobs_url_ttl_s: int = Field(900, ge=60, le=604800, description="lifetime of a result's image URL")

    # The UI and logs.
    ui: bool = Field(True, description="serve the Gradio UI at /")
    ui_file_ttl_s: int = Field(
        60, ge=1, le=86400, description="the UI's generated image files are deleted after this many seconds"
    )

    @property
    def loopback_only(self) -> bool:
        """Whether the service listens on a loopback address only (`make run`: HOST=127.0.0.1), never on the cluster
        (0.0.0.0 in the pods): whoever opens its page is at this machine and is its operator."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to any address

    @property
    def edit_body_limits(self) -> BodyLimits:
        """The body bound of POST /v1/images/edits and the UI's uploads: an image and a mask of MAX_UPLOAD_BYTES each
        (multipart carries them as they are) plus MAX_BODY_BYTES for the other fields. Every other route keeps
        MAX_BODY_BYTES."""
        return dataclasses.replace(self.body_limits, max_bytes=2 * self.max_upload_bytes + self.max_body_bytes)

    @property
    def neuron_sizes(self) -> tuple[ImageSize, ...] | None:
        """NEURON_SHAPES as sizes in the order given, or None when unset (serve every compiled size)."""
        return None if self.neuron_shapes is None else parse_sizes(self.neuron_shapes.split(","))

    @property
    def neuron_fused_loras(self) -> LoraSet:
        """NEURON_LORAS as a LoraSet (empty when unset)."""
        return parse_lora_keys(self.neuron_loras)

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        if self.default_steps is not None and self.default_steps > self.max_steps:
            raise ValueError(f"DEFAULT_STEPS={self.default_steps} is above MAX_STEPS={self.max_steps}")
        if self.min_size > self.max_size:
            raise ValueError(f"MIN_SIZE={self.min_size} is above MAX_SIZE={self.max_size}")
        if self.default_guidance_scale is not None and self.default_guidance_scale > self.max_guidance_scale:
            raise ValueError(
                f"DEFAULT_GUIDANCE_SCALE={self.default_guidance_scale} is above "
                f"MAX_GUIDANCE_SCALE={self.max_guidance_scale}"
            )
        if self.neuron_shapes is not None:
            try:
                parse_sizes(self.neuron_shapes.split(","))
            except ValueError as exc:
                raise ValueError(f"NEURON_SHAPES={self.neuron_shapes!r}: {exc}") from None
        for name in ("default_width", "default_height", "min_size", "max_size"):
            value = getattr(self, name)
            if value is not None and value % 8:
                raise ValueError(f"{name.upper()}={value} is not a multiple of 8")
        for name in ("default_width", "default_height"):
            value = getattr(self, name)
            if value is not None and not self.min_size <= value <= self.max_size:
                raise ValueError(
                    f"{name.upper()}={value} is outside MIN_SIZE..MAX_SIZE ({self.min_size}..{self.max_size})"
                )
        if self.max_loaded_loras < self.max_loras:
            raise ValueError(
                f"MAX_LOADED_LORAS={self.max_loaded_loras} is below MAX_LORAS={self.max_loras}: one request's "
                "adapters must fit at once"
            )
        try:
            parse_lora_keys(self.neuron_loras)
        except ValueError as exc:
            raise ValueError(f"NEURON_LORAS={self.neuron_loras!r}: {exc}") from None
        if self.jobs == "aws":
            needed = ("jobs_queue_url", "jobs_dead_letter_url", "jobs_bucket", "jobs_topic_arn")
            missing = [name.upper() for name in needed if not getattr(self, name)]
            if missing:
                raise ValueError(f"JOBS=aws needs {', '.join(missing)}")
        if self.jobs_queue_max_receives < self.jobs_max_receives:
            raise ValueError(
                f"JOBS_QUEUE_MAX_RECEIVES={self.jobs_queue_max_receives} is below "
                f"JOBS_MAX_RECEIVES={self.jobs_max_receives}: the queue would give up before the last attempt"
            )
        return self


def load_settings(**overrides: object) -> Settings:
    """Read the settings from the environment (overrides win) or raise one readable SettingsError."""
    return read_settings(Settings, **overrides)
