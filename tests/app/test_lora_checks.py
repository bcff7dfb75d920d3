"""The LoRA checks without a model: the request's adapters against LORA_DIR and the limits, a Neuron pool's fused
adapters, NEURON_LORAS and the settings' bounds, and the least-recently-used bookkeeping on a recording pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.backends.base import GenerationParams, LoraRefused
from app.backends.lora_slots import LoraSlots
from app.backends.neuron import CompiledPipeline, CompiledShape, NeuronBackend
from app.loras import find_adapters, lora_problems
from app.models.families import SD
from common.lora_keys import LoraRef, lora_set, parse_lora_keys
from common.settings import SettingsError
from tests.app.fakes import RecordingNeuronPipeline


def params(*loras: LoraRef) -> GenerationParams:
    return GenerationParams("a fox", "", 2, 7.5, 64, 64, 1, loras=lora_set(loras))


def test_a_fused_neuron_pool_serves_its_adapters_at_their_scale_and_names_what_it_cannot():
    pipeline = CompiledPipeline(RecordingNeuronPipeline(), CompiledShape(batch_size=1, height=64, width=64))
    backend = NeuronBackend([pipeline], SD, fused_loras=parse_lora_keys("ink:0.8"))
    backend.check(params())
    backend.check(params(LoraRef("ink", 0.8)))
    with pytest.raises(LoraRefused, match=r"adapter .wash. is not served by this Neuron pool.*fused here: ink:0\.8"):
        backend.check(params(LoraRef("wash")))
    with pytest.raises(LoraRefused, match=r"fused here at scale 0\.8, so scale 1 cannot be served"):
        backend.check(params(LoraRef("ink", 1.0)))
    plain = NeuronBackend([pipeline], SD)
    with pytest.raises(LoraRefused, match="fused here: none"):
        plain.check(params(LoraRef("ink")))
    assert backend.describe()["loras_fused"] == [{"name": "ink", "scale": 0.8}]


def test_the_request_checks_name_each_problem(tmp_path: Path):
    (tmp_path / "ink.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "notes.txt").write_text("not an adapter")
    (tmp_path / "bad name.safetensors").write_bytes(b"x")
    available = find_adapters(tmp_path)
    assert list(available) == ["ink"] and available["ink"].size_bytes == 10
    ok = lora_set([{"name": "ink", "scale": -2.0}])
    assert lora_problems(ok, available, max_loras=1, max_scale=2.0) == []
    problems = lora_problems(
        lora_set([{"name": "ink", "scale": 3.0}, {"name": "nope"}]), available, max_loras=1, max_scale=2.0
    )
    assert problems == [
        "loras names 2 adapters; at most 1 per request (MAX_LORAS)",
        "unknown adapter 'nope': GET /v1/images/adapters lists those served",
        "adapter 'ink': scale 3 is outside -2..2",
    ]
    assert "LORA_DIR" in lora_problems(lora_set([{"name": "ink"}]), {}, max_loras=1, max_scale=2.0)[0]


def test_equal_adapter_sets_are_equal_batch_keys_whatever_their_order():
    assert params(LoraRef("b"), LoraRef("a")).batch_key == params(LoraRef("a"), LoraRef("b")).batch_key
    assert params(LoraRef("a", 0.5)).batch_key != params(LoraRef("a", 1.0)).batch_key
    assert params().batch_key != params(LoraRef("a")).batch_key


@pytest.mark.parametrize(
    ("text", "error"),
    [("ink:x", "scale 'x' is not a number"), ("../ink", "must match"), ("ink,ink:0.5", "named more than once")],
)
def test_neuron_loras_that_cannot_be_read_stop_the_settings(text, error):
    with pytest.raises(ValueError, match=error):
        parse_lora_keys(text)


def test_the_settings_keep_one_request_s_adapters_loadable_at_once():
    from app.settings import load_settings

    with pytest.raises(SettingsError, match="MAX_LOADED_LORAS=2 is below MAX_LORAS=3"):
        load_settings(max_loras=3, max_loaded_loras=2)
    with pytest.raises(SettingsError, match="NEURON_LORAS"):
        load_settings(neuron_loras="ink:x")
    assert load_settings(neuron_loras="wash, ink:0.5").neuron_fused_loras == (LoraRef("ink", 0.5), LoraRef("wash"))


class RecordingLoraPipeline:
    """What LoraSlots calls on a diffusers pipeline, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.adapters: set[str] = set()

    def load_lora_weights(self, folder: str, weight_name: str, adapter_name: str) -> None:
        self.calls.append(("load", adapter_name))
        self.adapters.add(adapter_name)

    def delete_adapters(self, name: str) -> None:
        self.calls.append(("delete", name))
        self.adapters.discard(name)

    def set_adapters(self, names: list[str], adapter_weights: list[float]) -> None:
        self.calls.append(("set", tuple(zip(names, adapter_weights, strict=True))))

    def enable_lora(self) -> None:
        self.calls.append(("enable", None))

    def disable_lora(self) -> None:
        self.calls.append(("disable", None))

    def get_list_adapters(self) -> dict[str, list[str]]:
        return {"unet": sorted(self.adapters)}


def test_slots_load_on_demand_unload_the_least_recently_used_and_switch_adapters_off(tmp_path: Path):
    pipeline = RecordingLoraPipeline()
    slots = LoraSlots(pipeline, tmp_path, capacity=2)
    slots.activate(())
    assert pipeline.calls == []  # nothing loaded: nothing to switch off
    slots.activate(lora_set([LoraRef("a"), LoraRef("b", 0.5)]))
    assert pipeline.calls == [("load", "a"), ("load", "b"), ("enable", None), ("set", (("a", 1.0), ("b", 0.5)))]
    pipeline.calls.clear()
    slots.activate(lora_set([LoraRef("a")]))
    slots.activate(lora_set([LoraRef("c")]))  # b is the least recently used
    assert ("delete", "b") in pipeline.calls and slots.loaded == ["a", "c"]
    pipeline.calls.clear()
    slots.activate(())
    assert pipeline.calls == [("disable", None)]
