"""Our own CLIP-style BPE tokenizer files, so a built model needs nothing from a hub.

The vocabulary is byte-level: every byte as a character, alone and at a word's end, plus the two
special tokens. There are no merges, so each character is one token: enough for a demo model with
random weights, and loadable by any transformers version (we write vocab.json and merges.txt, the
files older releases in the Deep Learning Containers read, besides what save_pretrained adds).

The files must be loaded with `from_pretrained` (`load_tokenizer`): transformers 5 renamed the
constructor's arguments to `vocab`/`merges` and silently ignores `vocab_file`/`merges_file`, which
left a three-token vocabulary in which every prompt became the same ids (transformers 5.23
`models/clip/tokenization_clip.py`); `from_pretrained` reads vocab.json and merges.txt on 4.57 and 5.x.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

START_TOKEN = "<|startoftext|>"  # noqa: S105 - a tokenizer token, not a secret
END_TOKEN = "<|endoftext|>"  # noqa: S105 - a tokenizer token, not a secret


@cache
def byte_characters() -> tuple[str, ...]:
    """GPT-2/CLIP's reversible byte -> printable character table, in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


def vocabulary() -> dict[str, int]:
    """Token -> id: the 256 byte characters, the same at a word's end, then the special tokens."""
    chars = byte_characters()
    tokens = list(chars) + [c + "</w>" for c in chars] + [START_TOKEN, END_TOKEN]
    return {token: index for index, token in enumerate(tokens)}


def write_tokenizer_files(directory: Path) -> dict[str, int]:
    """Write vocab.json and merges.txt into `directory`; return the special tokens' ids."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return {"bos_token_id": vocab[START_TOKEN], "eos_token_id": vocab[END_TOKEN], "vocab_size": len(vocab)}


def load_tokenizer(directory: Path, max_length: int) -> Any:  # a transformers CLIPTokenizer (imported lazily)
    """The CLIP tokenizer over the files `write_tokenizer_files` wrote into `directory`."""
    from transformers import CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(str(directory), pad_token=END_TOKEN, model_max_length=max_length)
    expected = len(vocabulary())
    if len(tokenizer) != expected:
        raise RuntimeError(f"the tokenizer in {directory} has {len(tokenizer)} tokens, not {expected}")
    return tokenizer
