"""LoRA adapters on a diffusers pipeline (CPU and CUDA): loaded on demand, a bounded number kept, set per call.

diffusers' LoRA backend is peft: `load_lora_weights` adds an adapter's layers beside the model's, `set_adapters`
chooses which act and how strongly, `disable_lora` turns them all off and `delete_adapters` removes one. Keeping
adapters loaded makes the next request for them cost nothing; MAX_LOADED_LORAS bounds the memory they hold, and
loading one more unloads the least recently used. Runs on the pipeline thread only, one batch at a time.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

from app.loras import ADAPTER_SUFFIX, local_lora_dir
from app.settings import Settings
from common.lora_keys import LoraSet

log = logging.getLogger(__name__)


class LoraSlots:
    """The adapters loaded into one pipeline, least recently used first, and which are active."""

    def __init__(self, pipeline: Any, folder: Path | None, capacity: int):
        self.pipeline = pipeline
        self.folder = folder
        self.capacity = capacity
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self._active: LoraSet | None = ()  # None: unknown (a load failed part-way), set again on the next call

    @property
    def loaded(self) -> list[str]:
        """The loaded adapters, least recently used first."""
        return list(self._loaded)

    def activate(self, loras: LoraSet) -> None:
        """Make exactly `loras` act on the next pipeline call: load what is missing (unloading the least recently
        used beyond the capacity), then set the adapters and their scales, or turn adapters off for none."""
        if loras == self._active:
            for lora in loras:
                self._loaded.move_to_end(lora.name)
            return
        names = [lora.name for lora in loras]
        self._active = None
        for name in names:
            if name in self._loaded:
                self._loaded.move_to_end(name)
            else:
                self._load(name, keep=names)
        if loras:
            # set_adapters chooses the adapters and their weights but does not undo disable_lora.
            self.pipeline.enable_lora()
            self.pipeline.set_adapters(names, adapter_weights=[lora.scale for lora in loras])
        elif self._loaded:
            self.pipeline.disable_lora()
        self._active = loras

    def _load(self, name: str, keep: list[str]) -> None:
        if self.folder is None:  # app/params.py refuses adapters without LORA_DIR; this is a bug, not a request
            raise RuntimeError(f"adapter {name!r} asked for, but LORA_DIR is unset")
        while len(self._loaded) >= self.capacity:
            victim = next(loaded for loaded in self._loaded if loaded not in keep)
            self.pipeline.delete_adapters(victim)
            del self._loaded[victim]
            log.info("adapter unloaded (least recently used)", extra={"adapter": victim})
        try:
            self.pipeline.load_lora_weights(str(self.folder), weight_name=name + ADAPTER_SUFFIX, adapter_name=name)
        except Exception:
            # A half-loaded adapter would linger in the model's layers: take out what was added.
            if name in self._all_adapters():
                self.pipeline.delete_adapters(name)
            raise
        self._loaded[name] = None
        log.info("adapter loaded", extra={"adapter": name, "loaded": len(self._loaded)})

    def _all_adapters(self) -> set[str]:
        return {adapter for adapters in self.pipeline.get_list_adapters().values() for adapter in adapters}


def lora_slots(pipeline: Any, settings: Settings) -> LoraSlots:
    """The adapter slots of a CPU or CUDA pipeline: LORA_DIR's local folder, MAX_LOADED_LORAS of them."""
    return LoraSlots(pipeline, local_lora_dir(settings.lora_dir, settings.model_cache_dir), settings.max_loaded_loras)
