"""The controls both UI tabs show (negative prompt, steps, guidance, seed, LoRA adapters, the result and its
caption), built once: the Generate tab's named as they are, the Edit tab's with "Edit " and #edit- before their
labels and element ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.settings import Settings


@dataclass(frozen=True)
class Tab:
    """How a tab names its option controls: the Generate tab's as they are, the Edit tab's prefixed."""

    label: str = ""  # "Edit ": "Edit steps"
    elem_id: str = ""  # "edit-": #edit-steps

    def named(self, label: str, elem_id: str) -> dict[str, str]:
        """The label and element id of a control of this tab."""
        first = label.split(" ", 1)[0]
        # "Steps" reads "Edit steps"; a word with capitals inside (LoRA) keeps its case.
        lowered = label if any(c.isupper() for c in first[1:]) else label[0].lower() + label[1:]
        shown = f"{self.label}{lowered}" if self.label else label
        return {"label": shown, "elem_id": f"{self.elem_id}{elem_id}"}


GENERATE = Tab()
EDIT = Tab("Edit ", "edit-")


def negative_prompt(settings: Settings, controls: dict[str, dict[str, Any]], tab: Tab = GENERATE) -> gr.Textbox:
    """The negative prompt box, shown where the family takes one."""
    named = tab.named("Negative prompt", "negative-prompt")
    return gr.Textbox(max_length=settings.max_prompt_chars, **named, **controls["negative"])


def sampling(
    settings: Settings, controls: dict[str, dict[str, Any]], tab: Tab = GENERATE
) -> tuple[gr.Slider, gr.Slider]:
    """The steps and guidance sliders, fitted to the family."""
    steps = gr.Slider(1, settings.max_steps, step=1, **tab.named("Steps", "steps"), **controls["steps"])
    guidance = gr.Slider(0.0, settings.max_guidance_scale, **tab.named("Guidance", "guidance"), **controls["guidance"])
    return steps, guidance


def seed_and_adapters(
    settings: Settings, adapters: list[str], tab: Tab = GENERATE
) -> tuple[gr.Textbox, gr.Dropdown, gr.Slider]:
    """The seed box, and the LoRA picker and scale (hidden without adapters)."""
    # Text, not gr.Number: Gradio's page shows and sends an empty Number as 0 (gradio 6.31 frontend,
    # `value ??= 0`), which would repeat one image on every Generate.
    seed = gr.Textbox(value="", max_lines=1, **tab.named("Seed (empty: random)", "seed"))
    names = gr.Dropdown(
        adapters,
        value=[],
        multiselect=True,
        max_choices=settings.max_loras,
        visible=bool(adapters),
        **tab.named("LoRA adapters", "loras"),
    )
    scale = gr.Slider(
        -settings.max_lora_scale,
        settings.max_lora_scale,
        value=1.0,
        visible=bool(adapters),
        **tab.named("Adapter scale", "lora-scale"),
    )
    return seed, names, scale


def result(label: str, tab: Tab = GENERATE) -> tuple[gr.Image, gr.Markdown]:
    """The result image (#result) and its caption (#caption)."""
    # No "share" button: it shares to Hugging Face Spaces only, and elsewhere says "Must be on Spaces to share"
    # (gradio 6.31 components/image.py `buttons`: every built-in one by default).
    image = gr.Image(
        label=label,
        type="pil",
        format="png",
        elem_id=f"{tab.elem_id}result",
        interactive=False,
        height=420,
        buttons=["download", "fullscreen"],
    )
    return image, gr.Markdown(**tab.named("Caption", "caption"))
