"""Where the model comes from: MODEL_ID turned into something diffusers' loader can open."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

from app.models.builtin import BUILTIN_PREFIX, builtin_spec
from app.models.families import SD, Family, UnknownFamily, family_named, family_of
from app.models.random_pipeline import materialize
from common.model_store.download import download_s3_prefix, parse_s3_uri
from common.model_store.layout import ImageSize

log = logging.getLogger(__name__)

_HUB_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_model_source(model_id: str, cache_dir: Path) -> Path | str:
    """A local folder for builtin:, s3:// and local ids; the id itself for a Hugging Face repo.

    builtin models are built once into `cache_dir`; s3:// prefixes are downloaded into it.
    """
    if model_id.startswith(BUILTIN_PREFIX):
        return materialize(builtin_spec(model_id), cache_dir)
    if model_id.startswith("s3://"):
        bucket, prefix = parse_s3_uri(model_id)
        return download_s3_prefix(bucket, prefix, cache_dir / "s3" / bucket / prefix.strip("/"))
    local = Path(model_id).expanduser()
    if local.is_dir():
        return local
    if _HUB_REPO_ID.match(model_id) and not model_id.startswith((".", "/", "~")):
        return model_id
    raise ValueError(
        f"MODEL_ID={model_id!r} is not builtin:<name>, an existing directory, s3://bucket/prefix, "
        "or a Hugging Face repo id (owner/name)"
    )


def resolve_compiled_source(model_id: str, cache_dir: Path, sizes: Sequence[ImageSize] | None) -> Path | str:
    """Like `resolve_model_source`, but of an s3:// compiled prefix only the `<W>x<H>/` folders of `sizes`.

    Each compiled size is a whole pipeline with its weights (~34 GB for Flux): a pod that mirrored the prefix
    would also fetch sizes compiled earlier and no longer served, and overflow its cache volume. `sizes` None
    (NEURON_SHAPES unset: serve every size there is) mirrors the whole prefix.
    """
    if sizes is None or not model_id.startswith("s3://"):
        return resolve_model_source(model_id, cache_dir)
    bucket, prefix = parse_s3_uri(model_id)
    root = cache_dir / "s3" / bucket / prefix.strip("/")
    for size in sizes:
        download_s3_prefix(bucket, f"{prefix.strip('/')}/{size.key}/", root / size.key)
    return root


def fetch_adapters(lora_dir: str, folder: Path) -> None:
    """Mirror an s3:// LORA_DIR (the model store's adapters prefix) into `folder` at start-up, as the weights are;
    an empty prefix is no adapters, not an error."""
    bucket, prefix = parse_s3_uri(lora_dir)
    try:
        download_s3_prefix(bucket, prefix, folder)
    except FileNotFoundError:
        log.info("no LoRA adapters under %s", lora_dir)


def public_model_name(model_id: str) -> str:
    """What responses may say about MODEL_ID: a built-in or hub id as is, else only the folder's last name.

    An S3 URI or a local path tells a caller about buckets and file systems, so it stays in the logs.
    """
    if model_id.startswith(BUILTIN_PREFIX):
        return model_id
    if _HUB_REPO_ID.match(model_id) and not model_id.startswith((".", "/", "~")) and not Path(model_id).is_dir():
        return model_id
    return model_id.rstrip("/").rsplit("/", 1)[-1] or "model"


def declared_family(model_id: str) -> Family:
    """The family MODEL_ID declares before anything loads: a built-in's, or a local folder's model_index.json.

    For what cannot be read without a download (hub ids, s3:// prefixes) or a folder the loader will refuse
    anyway (with its own message), SD until the model has loaded.
    """
    if model_id.startswith(BUILTIN_PREFIX):
        try:
            return family_named(builtin_spec(model_id).family)
        except ValueError:
            return SD
    local = Path(model_id).expanduser()
    if local.is_dir():
        try:
            return family_of(local)
        except UnknownFamily:
            return SD
    return SD
