"""Our own T5-style Unigram tokenizer, so a built Flux model needs nothing from a hub.

T5's layout (<pad>=0, </s>=1, <unk>=2, then the pieces) over a tiny vocabulary: every printable ASCII
character alone and at a word's start ("▁x"), so every prompt maps to ids and different prompts to different
ids. transformers 5's `T5Tokenizer` (tokenizers-backed; `T5TokenizerFast` is the same class) builds the
Unigram model from a (piece, score) list (transformers 5.23 `models/t5/tokenization_t5.py`); it saves
tokenizer.json, which transformers 4.x's `T5TokenizerFast` also loads, so the folder names that class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORD_START = "\u2581"  # SentencePiece's word-boundary mark
SPECIAL = ("<pad>", "</s>", "<unk>")
T5_TOKENIZER_CLASS = "T5TokenizerFast"  # the name every transformers release since 4.x loads tokenizer.json with


def pieces() -> list[tuple[str, float]]:
    """(piece, log-probability) in id order: the specials, the word mark, then characters with and without it."""
    chars = [chr(code) for code in range(ord("!"), ord("~") + 1)]
    # Word-start pieces score higher, so "▁a" wins over "▁" + "a" and a word's first character is one token.
    return (
        [(token, 0.0) for token in SPECIAL]
        + [(WORD_START, -3.0)]
        + [(WORD_START + c, -2.0) for c in chars]
        + [(c, -2.5) for c in chars]
    )


def build_t5_tokenizer(max_length: int) -> Any:  # a transformers T5 tokenizer (imported lazily)
    """The tokenizer over `pieces()`, padding to `max_length` as Flux's T5 branch does."""
    from transformers import T5TokenizerFast

    tokenizer = T5TokenizerFast(vocab=pieces(), extra_ids=0, model_max_length=max_length)
    if len(tokenizer) != len(pieces()):
        raise RuntimeError(f"the T5 tokenizer has {len(tokenizer)} tokens, not {len(pieces())}")
    return tokenizer


def name_portable_t5_tokenizer(model_dir: Path) -> None:
    """Record tokenizer_2 as T5TokenizerFast in model_index.json, so transformers 4.x loads tokenizer.json.

    transformers 5 saves the class as "T5Tokenizer", which 4.x reads as the SentencePiece class that needs a
    spiece.model we do not have. It also writes `"extra_special_tokens": []`, which 4.57 (the Neuron image's line)
    reads as a mapping and fails on (tokenization_utils_base.py _set_model_specific_special_tokens calls .keys());
    an empty list says nothing, so it is dropped (found by the Neuron contract run, tests/contract).
    """
    index_path = model_dir / "model_index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    entry = index.get("tokenizer_2")
    if isinstance(entry, list) and entry[1] == "T5Tokenizer":
        index["tokenizer_2"] = ["transformers", T5_TOKENIZER_CLASS]
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    config_path = model_dir / "tokenizer_2" / "tokenizer_config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if config.get("extra_special_tokens") == []:
            del config["extra_special_tokens"]
            config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
