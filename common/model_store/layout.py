"""Where things live in the model store bucket.

The CDK app (to set MODEL_ID per Deployment and to scope IAM to one prefix), the Neuron compile
job and the README all use these functions, so a key written by one side is the key read by the
other. Keep this module free of heavy imports: the CDK app imports it at synth time.

Layout:
    models/<model-slug>/                                             weights in diffusers layout
    loras/<model-key>/                                               LoRA adapters for the model, one
                                                                     NAME.safetensors each (LORA_DIR)
    compiled/<model-slug>/neuron-sdk-<ver>/b<batch>-tp<N>[-lora-<hash>]/<W>x<H>/
                                                                     Neuron-compiled artifacts, one
                                                                     folder per image size, each with
                                                                     its own completion marker; the
                                                                     variant names the fused adapters

A model id is a Hugging Face repo id (`org/name`, staged into `models/<slug>/` by the deploy) or an
`s3://bucket/prefix/` URI (weights you bring; they are read where they are, and compiled under
`compiled/s3-<last folder>-<hash>/`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

WEIGHTS_ROOT: Final = "models"
COMPILED_ROOT: Final = "compiled"
LORAS_ROOT: Final = "loras"
COMPLETE_MARKER: Final = "_COMPLETE.json"
"""Written last by the compile job; its presence means every artifact under the prefix is uploaded."""

_SLUG_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")


def model_slug(model_id: str) -> str:
    """A key-safe name for a Hugging Face style model id: `org/name` -> `org--name` (lower case).

    Raises ValueError for ids that are not one or two simple path segments, so that a typo can never
    produce a key outside the model's own prefix (no `..`, no leading slash, no empty segment).
    """
    parts = model_id.split("/")
    if not 1 <= len(parts) <= 2 or not all(_SLUG_PART.fullmatch(p) and p not in (".", "..") for p in parts):
        raise ValueError(f"model id {model_id!r} is not of the form 'name' or 'org/name'")
    return "--".join(parts).lower()


@dataclass(frozen=True)
class CompileShape:
    """The static shape one Neuron export compiles: the batch size and one image size (the artifact key holds
    the batch size in the compiled prefix and the size as its folder, `ImageSize`)."""

    batch_size: int
    height: int
    width: int

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch size {self.batch_size} must be at least 1")
        for name in ("height", "width"):
            value = getattr(self, name)
            if value < 64 or value % 8:
                raise ValueError(f"{name} {value} must be a multiple of 8 and at least 64")

    @property
    def key(self) -> str:
        """`b<batch>-h<height>-w<width>`."""
        return f"b{self.batch_size}-h{self.height}-w{self.width}"


_SIZE = re.compile(r"([1-9][0-9]*)x([1-9][0-9]*)")


@dataclass(frozen=True)
class ImageSize:
    """One image size (width x height) a Neuron pipeline is compiled for: its folder under the compiled prefix."""

    width: int
    height: int

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if value < 64 or value % 8:
                raise ValueError(f"{name} {value} must be a multiple of 8 and at least 64")

    @classmethod
    def parse(cls, text: str) -> ImageSize:
        """`WxH` (e.g. `1024x1024`, `896x1152`) -> ImageSize; ValueError naming the expected form."""
        match = _SIZE.fullmatch(text.strip())
        if not match:
            raise ValueError(f"size {text!r} is not of the form WIDTHxHEIGHT, e.g. 1024x1024")
        return cls(int(match[1]), int(match[2]))

    @property
    def key(self) -> str:
        """`<W>x<H>`: the size's folder name under the compiled prefix."""
        return f"{self.width}x{self.height}"


def parse_sizes(texts: Iterable[str]) -> tuple[ImageSize, ...]:
    """Sizes in the order given; ValueError for a malformed one, none at all, or one given twice."""
    sizes = tuple(ImageSize.parse(text) for text in texts)
    if not sizes:
        raise ValueError("no image size given (WIDTHxHEIGHT, e.g. 1024x1024)")
    repeated = sorted({s.key for s in sizes if sizes.count(s) > 1})
    if repeated:
        raise ValueError(f"size {', '.join(repeated)} is given more than once")
    return sizes


def is_s3_uri(model_id: str) -> bool:
    """True for bring-your-own weights given as `s3://bucket/prefix`."""
    return model_id.startswith("s3://")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> (`bucket`, `some/prefix/`); ValueError without bucket or prefix."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    if not is_s3_uri(uri) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket) or not prefix:
        raise ValueError(f"{uri!r} is not of the form s3://bucket/prefix")
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"{uri!r} has an empty, '.' or '..' path segment")
    return bucket, prefix + "/"


def model_key(model_id: str) -> str:
    """The model's name under `compiled/`: its slug, or for an s3:// URI its last folder plus a short hash
    of the whole URI (two buckets may hold folders of the same name)."""
    if not is_s3_uri(model_id):
        return model_slug(model_id)
    bucket, prefix = split_s3_uri(model_id)
    last = re.sub(r"[^a-z0-9._-]+", "-", prefix.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-._") or "weights"
    digest = hashlib.sha256(f"s3://{bucket}/{prefix}".encode()).hexdigest()[:10]
    return f"s3-{last[:40]}-{digest}"


def weights_location(model_id: str, store_bucket: str) -> tuple[str, str]:
    """(bucket, prefix) of the weights: the model store's `models/<slug>/`, or the given s3:// URI."""
    return split_s3_uri(model_id) if is_s3_uri(model_id) else (store_bucket, weights_prefix(model_id))


def weights_prefix(model_id: str) -> str:
    """The prefix holding the model's weights in diffusers layout, ending in '/'."""
    return f"{WEIGHTS_ROOT}/{model_slug(model_id)}/"


def compiled_model_prefix(model_id: str) -> str:
    """The prefix holding every compiled variant of one model, ending in '/'."""
    return f"{COMPILED_ROOT}/{model_key(model_id)}/"


def loras_prefix(model_id: str) -> str:
    """The prefix holding the model's LoRA adapters (one NAME.safetensors each), beside its weights, ending in '/'."""
    return f"{LORAS_ROOT}/{model_key(model_id)}/"


def compiled_prefix(
    model_id: str, neuron_sdk_version: str, batch_size: int, tensor_parallel_size: int, variant: str = ""
) -> str:
    """The prefix of the artifacts compiled for one model, Neuron SDK version, batch size and tensor parallel
    size, ending in '/': each image size is a folder below it (`shape_prefix`). `variant` (common/lora_keys.py
    `fused_variant`) tells apart compiles with other adapters fused into the weights."""
    if not _VERSION.fullmatch(neuron_sdk_version):
        raise ValueError(f"Neuron SDK version {neuron_sdk_version!r} is not dotted digits such as 2.31.1")
    for name, value in (("batch size", batch_size), ("tensor parallel size", tensor_parallel_size)):
        if value < 1:
            raise ValueError(f"{name} {value} must be at least 1")
    if variant and not _SLUG_PART.fullmatch(variant):
        raise ValueError(f"compile variant {variant!r} is not a simple name")
    suffix = f"-{variant}" if variant else ""
    return (
        f"{compiled_model_prefix(model_id)}neuron-sdk-{neuron_sdk_version}/"
        f"b{batch_size}-tp{tensor_parallel_size}{suffix}/"
    )


def shape_prefix(prefix: str, size: ImageSize) -> str:
    """The folder of one image size's compiled pipeline under a compiled prefix, ending in '/'."""
    return f"{prefix}{size.key}/"


def s3_uri(bucket: str, prefix: str) -> str:
    """`s3://<bucket>/<prefix>`: the MODEL_ID form the service accepts."""
    return f"s3://{bucket}/{prefix}"
