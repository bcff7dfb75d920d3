"""Our own CLIP-style BPE tokenizer files, so a built model needs nothing from a hub.

The vocabulary is byte-level: every byte as a character, alone and at a word's end, plus the two
special tokens. There are no merges, so each character is one token: enough for a demo model with
random weights, and loadable by any transformers version (we write vocab.json and merges.txt, the
files older releases in the Deep Learning Containers read, besides what save_pretrained adds).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

START_TOKEN = "<|startoftext|>"  # noqa: S105 - a tokenizer token, not a secret
END_TOKEN = "<|endoftext|>"  # noqa: S105 - a tokenizer token, not a secret


@cache
def _bytes_to_unicode() -> tuple[str, ...]:
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
    chars = _bytes_to_unicode()
    tokens = list(chars) + [c + "</w>" for c in chars] + [START_TOKEN, END_TOKEN]
    return {token: index for index, token in enumerate(tokens)}


def write_tokenizer_files(directory: Path) -> dict[str, int]:
    """Write vocab.json and merges.txt into `directory`; return the special tokens' ids."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return {"bos_token_id": vocab[START_TOKEN], "eos_token_id": vocab[END_TOKEN], "vocab_size": len(vocab)}
