"""Stage a model's weights into the model store, once.

    python -m common.model_store.stage --bucket B --model-id org/name [--revision REV]
    python -m common.model_store.stage --bucket B --model-id org/name --from-dir ./weights
    python -m common.model_store.stage --layout transformers --settings llm --expect-config num_attention_heads=12 ...

The deploy runs the first form in CodeBuild (cdk/serving/model_staging.py): it downloads the
diffusers-layout files of a Hugging Face Hub repository (`--layout transformers`: a language model's
top-level config, tokenizer and weight files) and uploads them to `models/<slug>/`,
writing the completion marker last. A prefix that already has the marker is left alone, so a
redeploy costs one HEAD request; a prefix without it (an interrupted earlier run) is staged again
and objects the new set does not contain are removed. A Hub token for gated models comes from the
HF_TOKEN environment variable (CodeBuild fills it from Secrets Manager at build time).
`--from-dir` stages a local folder instead of the Hub (for weights you have, or offline tests).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.model_store.layout import COMPLETE_MARKER, weights_prefix
from common.model_store.marker import marker_exists, write_marker
from common.model_store.upload import upload_files

log = logging.getLogger("stage")

MODEL_INDEX = "model_index.json"
MODEL_CONFIG = "config.json"  # a transformers model's
LAYOUTS = ("diffusers", "transformers")
# Component files other than weights: configs, tokenizer vocabularies, sentencepiece models.
_SIDE_FILES = (".json", ".txt", ".model")
_WEIGHT_FORMATS = (".safetensors", ".bin")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class StageError(RuntimeError):
    """The weights cannot be staged; the message says why and what to do."""


@dataclass(frozen=True)
class Fetched:
    """A local folder holding the model, the files to publish from it, and where they came from."""

    root: Path
    files: tuple[str, ...]
    source: str
    revision: str | None


# (scratch folder) -> Fetched
Fetcher = Callable[[Path], Fetched]


def _is_variant(name: str) -> bool:
    """`model.fp16.safetensors`, `diffusion_pytorch_model.non_ema.bin`: a precision/EMA variant."""
    parts = name.split(".")
    return len(parts) >= 3 and parts[-1] in ("safetensors", "bin")


def select_weight_files(files: Iterable[str]) -> list[str]:
    """The files a diffusers pipeline loads: `model_index.json` and, per component folder, its configs,
    tokenizer files and one weight format (safetensors if the folder has any, else .bin), without
    precision variants. Single-file checkpoints at the top level (`*.ckpt`, `*.safetensors`) and other
    frameworks' exports are left out: they can be larger than the pipeline itself.

    Raises StageError when there is no `model_index.json` (not a diffusers-layout repository).
    """
    all_files = sorted(set(files))
    if MODEL_INDEX not in all_files:
        raise StageError(f"no {MODEL_INDEX} at the top: not a diffusers-layout model")
    by_folder: dict[str, list[str]] = {}
    for path in all_files:
        folder, _, name = path.rpartition("/")
        if folder and "/" not in folder and not folder.startswith("."):
            by_folder.setdefault(folder, []).append(name)
    selected = [MODEL_INDEX]
    for folder, names in sorted(by_folder.items()):
        weights = [n for n in names if n.endswith(_WEIGHT_FORMATS) and not _is_variant(n)]
        preferred = [n for n in weights if n.endswith(".safetensors")] or weights
        side = [n for n in names if n.endswith(_SIDE_FILES)]
        selected += [f"{folder}/{n}" for n in sorted(set(side) | set(preferred))]
    return selected


def select_transformers_files(files: Iterable[str]) -> list[str]:
    """The files a transformers model (and vLLM) loads: the top-level configs and tokenizer files and one
    weight format (every safetensors shard if there is one, else the .bin shards), without precision
    variants. Sub-folders (other frameworks' exports, `original/` checkpoints) and GGUF or ONNX files are
    left out: they can be larger than the model itself.

    Raises StageError when there is no top-level `config.json` (not a transformers-layout model).
    """
    top = sorted({f for f in files if "/" not in f and not f.startswith(".")})
    if MODEL_CONFIG not in top:
        raise StageError(f"no {MODEL_CONFIG} at the top: not a transformers-layout model")
    weights = [n for n in top if n.endswith(_WEIGHT_FORMATS) and not _is_variant(n)]
    preferred = [n for n in weights if n.endswith(".safetensors")] or weights
    if not preferred:
        raise StageError("no .safetensors or .bin weights at the top")
    side = [n for n in top if n.endswith(_SIDE_FILES)]
    return sorted(set(side) | set(preferred))


SELECTORS: dict[str, Callable[[Iterable[str]], list[str]]] = {
    "diffusers": select_weight_files,
    "transformers": select_transformers_files,
}


@dataclass(frozen=True)
class Settings:
    """The CDK settings the staged model comes from: the deploy is the usual caller, so errors name them."""

    model: str
    revision: str
    token: str = "servingHubTokenSecretName"  # noqa: S105 (a setting name, not a secret)


SETTINGS = {
    "serving": Settings("servingModelId", "servingModelRevision"),
    "llm": Settings("llmModelId", "llmModelRevision"),
}
# The config.json fields a deploy may expect (--expect-config), and the setting each must agree with.
CONFIG_SETTINGS = {"num_attention_heads": "llmModelAttentionHeads", "num_key_value_heads": "llmModelKvHeads"}


def hub_fetcher(
    repo_id: str,
    revision: str | None,
    token: str | None,
    *,
    layout: str = "diffusers",
    settings: Settings = SETTINGS["serving"],
) -> Fetcher:
    """Download the selected files of `repo_id` at one commit from the Hugging Face Hub."""

    def fetch(scratch: Path) -> Fetched:
        # huggingface_hub 2.4.0 (requirements-stage.txt): HfApi.model_info(repo_id, *, revision, token)
        # returns .sha and .siblings[].rfilename; snapshot_download(repo_id, *, revision, local_dir,
        # token, allow_patterns) (signatures read from the installed package, tests/common/test_model_store_stage.py).
        # The error classes and the status/X-Error-Code each maps from: huggingface_hub/utils/_http.py,
        # hf_raise_for_status (a withdrawn or misspelled repository answers 401 or 404 -> RepositoryNotFound).
        import httpx2  # huggingface_hub 2.4's HTTP client (requirements-stage.txt)
        from huggingface_hub import HfApi, snapshot_download
        from huggingface_hub.errors import (
            DisabledRepoError,
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        named = f"{settings.model} {repo_id!r}"
        try:
            info = HfApi().model_info(repo_id, revision=revision, token=token)
            files = SELECTORS[layout](s.rfilename for s in info.siblings or [])
            local = scratch / "hub"
            snapshot_download(repo_id, revision=info.sha, local_dir=local, token=token, allow_patterns=files)
        except GatedRepoError as exc:  # a subclass of RepositoryNotFoundError: test it first
            raise StageError(
                f"{named} is gated on the Hugging Face Hub: accept its licence there and give the deploy a token "
                f"({settings.token}, docs/serving.md)"
            ) from exc
        except RepositoryNotFoundError as exc:
            raise StageError(
                f"{named} is not on the Hugging Face Hub (withdrawn, misspelled, or private without a token "
                f"in {settings.token}): set {settings.model} to a model that exists (docs/serving.md)"
            ) from exc
        except RevisionNotFoundError as exc:
            raise StageError(f"{named} has no revision {revision!r}: fix {settings.revision}") from exc
        except DisabledRepoError as exc:
            raise StageError(f"{named} is disabled on the Hugging Face Hub: choose another {settings.model}") from exc
        except HfHubHTTPError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StageError(f"the Hugging Face Hub refused {named}: {first_line}") from exc
        except httpx2.TransportError as exc:
            raise StageError(f"the Hugging Face Hub could not be reached for {named}: {exc}") from exc
        except StageError as exc:
            raise StageError(f"{named}: {exc}") from exc
        return Fetched(root=local, files=tuple(files), source=f"hf://{repo_id}", revision=info.sha)

    return fetch


def dir_fetcher(folder: Path, *, layout: str = "diffusers") -> Fetcher:
    """Stage the selected files of a local folder in `layout`."""

    def fetch(scratch: Path) -> Fetched:
        if not folder.is_dir():
            raise StageError(f"{folder} is not a directory")
        present = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
        return Fetched(root=folder, files=tuple(SELECTORS[layout](present)), source=str(folder), revision=None)

    return fetch


def _existing_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return keys


def _delete(s3: Any, bucket: str, keys: list[str]) -> None:
    for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
        batch = [{"Key": k} for k in keys[start : start + 1000]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def check_config(root: Path, expected: dict[str, int]) -> None:
    """Stop when the model's config.json disagrees with what the deploy was configured for (the tensor
    parallel degree was checked against these at synth time), naming the setting to fix."""
    if not expected:
        return
    config = json.loads((root / MODEL_CONFIG).read_text(encoding="utf-8"))
    for field, value in expected.items():
        actual = config.get(field)
        if actual != value:
            raise StageError(
                f"the model's {MODEL_CONFIG} has {field} = {actual!r}, but {CONFIG_SETTINGS[field]} is {value}: "
                f"set {CONFIG_SETTINGS[field]} to the model's value"
            )


def _check_staged_revision(
    s3: Any, bucket: str, prefix: str, revision: str | None, setting: str = SETTINGS["serving"].revision
) -> None:
    """Stop when the prefix holds another commit than the pinned one: pods and compiled artifacts would
    silently keep the old weights."""
    if revision is None or not _COMMIT.fullmatch(revision):
        return  # a branch or tag moves; the commit staged first stays until the prefix is cleared
    staged = json.loads(s3.get_object(Bucket=bucket, Key=prefix + COMPLETE_MARKER)["Body"].read()).get("revision")
    if staged is not None and staged != revision:
        raise StageError(
            f"s3://{bucket}/{prefix} holds revision {staged}, but {setting} is {revision}: to serve the "
            f"new revision, delete that prefix and the model's compiled/ prefix, then deploy again"
        )


def stage(
    s3: Any,
    *,
    bucket: str,
    prefix: str,
    fetch: Fetcher,
    scratch: Path,
    revision: str | None = None,
    settings: Settings = SETTINGS["serving"],
    expect_config: dict[str, int] | None = None,
) -> bool:
    """Publish the fetched model under `prefix` unless its marker exists; True when it staged.

    `revision` is the one asked for: a commit that differs from the staged one stops with a StageError.
    `expect_config`: config.json fields the model must have (CONFIG_SETTINGS), checked before anything is uploaded.
    """
    if marker_exists(s3, bucket, prefix):
        _check_staged_revision(s3, bucket, prefix, revision, settings.revision)
        log.info("already staged: s3://%s/%s%s exists, nothing to do", bucket, prefix, COMPLETE_MARKER)
        return False
    fetched = fetch(scratch)
    missing = [f for f in fetched.files if not (fetched.root / f).is_file()]
    if missing:
        raise StageError(f"the download did not produce {missing[:5]}")
    check_config(fetched.root, expect_config or {})
    stale = [k for k in _existing_keys(s3, bucket, prefix) if k[len(prefix) :] not in fetched.files]
    if stale:
        log.info("removing %d objects an earlier, unfinished run left under s3://%s/%s", len(stale), bucket, prefix)
        _delete(s3, bucket, stale)
    size = sum((fetched.root / f).stat().st_size for f in fetched.files)
    log.info("uploading %d files (%.2f GB) to s3://%s/%s", len(fetched.files), size / 1e9, bucket, prefix)
    uploaded = upload_files(s3, bucket, fetched.root, fetched.files, prefix)
    # The marker goes last: the compile job and a re-run treat the prefix as complete only once it exists.
    write_marker(
        s3,
        bucket,
        prefix,
        {"source": fetched.source, "revision": fetched.revision, "bytes": size, "files": uploaded},
    )
    log.info("staged %s into s3://%s/%s", fetched.source, bucket, prefix)
    return True


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m common.model_store.stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True, help="the model store bucket")
    parser.add_argument("--model-id", required=True, help="Hub repo id org/name; staged under models/<slug>/")
    parser.add_argument(
        "--revision", default=None, help="commit (pinned), branch or tag on the Hub; empty or absent: main"
    )
    parser.add_argument("--from-dir", type=Path, default=None, help="stage this local folder instead of the Hub")
    parser.add_argument("--work-dir", type=Path, default=None, help="scratch space for the download")
    parser.add_argument("--layout", choices=LAYOUTS, default="diffusers", help="which files make the model")
    parser.add_argument(
        "--settings", choices=sorted(SETTINGS), default="serving", help="the CDK settings errors name (serving*, llm*)"
    )
    parser.add_argument(
        "--expect-config",
        action="append",
        default=[],
        metavar="FIELD=N",
        help=f"a config.json field the model must have; one of {', '.join(CONFIG_SETTINGS)}",
    )
    return parser.parse_args(list(argv))


def _expected_config(pairs: Sequence[str]) -> dict[str, int]:
    expected: dict[str, int] = {}
    for pair in pairs:
        field, _, value = pair.partition("=")
        if field not in CONFIG_SETTINGS or not value.isdigit():
            raise ValueError(
                f"--expect-config {pair!r}: expected FIELD=N with FIELD one of {', '.join(CONFIG_SETTINGS)}"
            )
        expected[field] = int(value)
    return expected


def main(argv: Sequence[str] | None = None, s3: Any = None) -> int:
    """Stage once; returns the exit status (errors are one readable line)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        prefix = weights_prefix(args.model_id)
        settings = SETTINGS[args.settings]
        expected = _expected_config(args.expect_config)
        if args.from_dir is not None:
            fetch = dir_fetcher(args.from_dir, layout=args.layout)
        else:
            # Set by CodeBuild from Secrets Manager when a token secret is configured; never logged.
            token = os.environ.get("HF_TOKEN") or None
            fetch = hub_fetcher(args.model_id, args.revision or None, token, layout=args.layout, settings=settings)
        if s3 is None:
            import boto3

            s3 = boto3.client("s3")
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="stage-", dir=args.work_dir) as scratch:
            stage(
                s3,
                bucket=args.bucket,
                prefix=prefix,
                fetch=fetch,
                scratch=Path(scratch),
                revision=args.revision or None,
                settings=settings,
                expect_config=expected,
            )
    except (StageError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
