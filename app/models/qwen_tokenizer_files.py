"""Our own Qwen2-style byte-level BPE tokenizer, so a built 2026-family model needs nothing from a hub.

FLUX.2 [klein], Z-Image and Qwen-Image encode prompts with a Qwen language model through a `Qwen2Tokenizer`
(diffusers 0.42.1 `pipeline_flux2_klein.py`, `pipeline_z_image.py`, `pipeline_qwenimage.py`). The first two
wrap the prompt with `apply_chat_template` (so the tokenizer needs a chat template), Qwen-Image with its own
`<|im_start|>` template. The vocabulary is GPT-2's 256 byte characters with no merges (one token a byte), then
the three special tokens the templates and padding use: every prompt maps to ids, different prompts to
different ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.models.tokenizer_files import byte_characters

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
VOCAB_SIZE = 256 + 3  # the byte characters, then END_OF_TEXT, IM_START, IM_END
END_OF_TEXT_ID = 256

# Qwen's ChatML layout, without the system prompt and the thinking switch of the real template: the pipelines
# pass `enable_thinking=False`, which a template that does not read it ignores.
CHAT_TEMPLATE = (
    "{% for message in messages %}" + IM_START + "{{ message['role'] }}\n{{ message['content'] }}" + IM_END + "\n"
    "{% endfor %}{% if add_generation_prompt %}" + IM_START + "assistant\n{% endif %}"
)


def build_qwen_tokenizer(directory: Path) -> Any:  # a transformers Qwen2Tokenizer (imported lazily)
    """Write vocab.json and merges.txt into `directory` and load the tokenizer over them."""
    from transformers import Qwen2Tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {char: index for index, char in enumerate(byte_characters())}
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = Qwen2Tokenizer.from_pretrained(
        str(directory),
        unk_token=None,
        bos_token=None,
        eos_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        additional_special_tokens=[IM_START, IM_END],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    if len(tokenizer) != VOCAB_SIZE:
        raise RuntimeError(f"the tokenizer in {directory} has {len(tokenizer)} tokens, not {VOCAB_SIZE}")
    return tokenizer
