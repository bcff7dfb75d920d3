"""What a model catalog's entries are made of: facts, each with the place it was read.

A preset catalog (LLM presets in cdk/llm/presets.py, image models beside their workload) holds facts that
decide a synth (head counts, sizes, licences). Each carries its source so a reader, a test and the docs can
tell a verified fact from a chosen operating value, and a bumped fact cannot lose its citation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A verified fact and where it was read (repository@commit path, a documentation page, an issue thread)."""

    value: T
    source: str

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError(f"the fact {self.value!r} names no source")
