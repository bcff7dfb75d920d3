"""LoRA adapters: what a request names, where the files are, and the checks every route and backend shares.

An adapter is one `NAME.safetensors` file in LORA_DIR (a folder, or an s3:// prefix of the model store that the
service mirrors into MODEL_CACHE_DIR at start-up, like the weights). A request names adapters and their scales
(`loras: [{"name", "scale"}]`); it never names a path or a URL. The CPU and CUDA backends load the named files on
demand (app/backends/lora_slots.py); a Neuron pool serves only the adapters fused into its compiled pipeline
(NEURON_LORAS), at their fused scales.

Names and scales as written in settings (`name:scale`) are common/lora_keys.py's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from common.lora_keys import NAME_PATTERN, LoraRef, LoraSet

ADAPTER_SUFFIX: Final = ".safetensors"
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class AdapterFile:
    """An adapter found in LORA_DIR."""

    name: str
    path: Path
    size_bytes: int


def local_lora_dir(lora_dir: str | None, cache_dir: Path) -> Path | None:
    """The local folder holding the adapters: LORA_DIR itself, or for an s3:// prefix its mirror in the cache."""
    if not lora_dir:
        return None
    if lora_dir.startswith("s3://"):
        bucket, _, prefix = lora_dir.removeprefix("s3://").partition("/")
        return cache_dir / "loras" / bucket / prefix.strip("/")
    return Path(lora_dir).expanduser()


def find_adapters(folder: Path | None) -> dict[str, AdapterFile]:
    """The adapters in `folder` by name (files `NAME.safetensors` with a valid name); none without a folder."""
    if folder is None or not folder.is_dir():
        return {}
    found = {}
    for path in sorted(folder.glob(f"*{ADAPTER_SUFFIX}")):
        name = path.name.removesuffix(ADAPTER_SUFFIX)
        if path.is_file() and _NAME.fullmatch(name):
            found[name] = AdapterFile(name, path, path.stat().st_size)
    return found


def lora_problems(
    loras: LoraSet, available: Mapping[str, AdapterFile], *, max_loras: int, max_scale: float
) -> list[str]:
    """What is wrong with a request's adapters, each problem naming the adapter and the limit; [] when none."""
    problems = []
    if len(loras) > max_loras:
        problems.append(f"loras names {len(loras)} adapters; at most {max_loras} per request (MAX_LORAS)")
    names = [lora.name for lora in loras]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"adapter {name!r} is named more than once in loras")
    unknown = sorted({name for name in names if name not in available})
    if unknown:
        where = "GET /v1/images/adapters lists those served" if available else "this deployment has none (LORA_DIR)"
        problems.append(f"unknown adapter {', '.join(map(repr, unknown))}: {where}")
    for lora in loras:
        if not -max_scale <= lora.scale <= max_scale:
            problems.append(f"adapter {lora.name!r}: scale {lora.scale:g} is outside -{max_scale:g}..{max_scale:g}")
    return problems


def fused_lora_problems(loras: LoraSet, fused: Sequence[LoraRef]) -> list[str]:
    """What a pool whose compiled pipeline fuses `fused` cannot serve of `loras`: another adapter, or a fused one at
    another scale (a fused adapter's scale is part of the compiled weights); [] when none."""
    by_name = {ref.name: ref for ref in fused}
    served = ", ".join(ref.key for ref in fused) or "none"
    problems = []
    for lora in loras:
        fused_ref = by_name.get(lora.name)
        if fused_ref is None:
            problems.append(
                f"adapter {lora.name!r} is not served by this Neuron pool: its adapters are fused at compile time "
                f"(fused here: {served}); send it to a GPU or CPU pool"
            )
        elif fused_ref.scale != lora.scale:
            problems.append(
                f"adapter {lora.name!r} is fused here at scale {fused_ref.scale:g}, so scale {lora.scale:g} cannot be "
                "served by this Neuron pool; send it to a GPU or CPU pool"
            )
    return problems
