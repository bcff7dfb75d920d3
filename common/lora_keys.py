"""LoRA adapter names and scales as the service, the Neuron compile and the CDK app write them: `name:scale`.

A deployment names the adapters a Neuron pool fuses at compile time as `name:scale` items (the CDK setting
neuronCompileLoras, the compile command's --lora, the pod's NEURON_LORAS); a request names adapters with a scale
each. Both parse into the same LoraRef. No heavy imports: the CDK app imports this module at synth time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""An adapter's name: its file's name without the suffix; no path separator, so a name never leaves its folder."""
_NAME = re.compile(NAME_PATTERN)
DEFAULT_SCALE: Final = 1.0


@dataclass(frozen=True)
class LoraRef:
    """One adapter a request applies, and how strongly (diffusers' adapter weight)."""

    name: str
    scale: float = DEFAULT_SCALE

    @property
    def key(self) -> str:
        """`name:scale`, the form NEURON_LORAS and the compile command's --lora take."""
        return f"{self.name}:{self.scale:g}"


LoraSet = tuple[LoraRef, ...]
"""A request's adapters, sorted by name: equal sets are equal tuples, so they share a batch."""


def lora_set(loras: Iterable[LoraRef | Mapping[str, Any]] | None) -> LoraSet:
    """A request's `loras` (models dumped to dicts, or LoraRefs) as a LoraSet; None and [] are the empty set."""
    refs = [
        lora if isinstance(lora, LoraRef) else LoraRef(str(lora["name"]), float(lora.get("scale", DEFAULT_SCALE)))
        for lora in loras or ()
    ]
    return tuple(sorted(refs, key=lambda ref: ref.name))


def parse_lora_keys(texts: str | Iterable[str] | None) -> LoraSet:
    """`name:scale,name:scale` (NEURON_LORAS) or a list of `name:scale` (neuronCompileLoras, --lora) as a LoraSet;
    a name alone has scale 1; ValueError if malformed."""
    items = (texts or "").split(",") if isinstance(texts, str) or texts is None else list(texts)
    refs = []
    for item in (part.strip() for part in items):
        if not item:
            continue
        name, _, scale = item.partition(":")
        if not _NAME.fullmatch(name):
            raise ValueError(f"adapter name {name!r} must match {NAME_PATTERN}")
        try:
            value = float(scale) if scale else DEFAULT_SCALE
        except ValueError:
            raise ValueError(f"adapter {name}: scale {scale!r} is not a number") from None
        refs.append(LoraRef(name, value))
    names = [ref.name for ref in refs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"adapter {', '.join(repeated)} is named more than once")
    return lora_set(refs)


def fused_variant(loras: LoraSet) -> str:
    """The compiled artifacts' variant for the adapters fused into them: `""` for none, else `lora-<hash>` of
    their names and scales (other adapters are other weights, so another compile)."""
    if not loras:
        return ""
    return "lora-" + hashlib.sha256(",".join(ref.key for ref in loras).encode()).hexdigest()[:10]
