"""The gateway's per-token path in C (relay.c): the upstream's chunked body decoded, and a stream's plain events
written to the client, in the read callback with no Python frame per token.

The Python path (llm_gateway/upstream.py's `_ChunkedBody`, llm_gateway/gateway.py's `_StreamRelay`) gives the same
answers and stays the reference: the gateway uses this module only when it was built from this very relay.c
(`python -m llm_gateway.native.build`; the gateway image builds it, `make` targets build it when a C compiler is
there) and NATIVE_RELAY is on.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).with_name("relay.c")


def source_digest() -> str:
    """What a module built from today's relay.c says it was built from."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


@cache
def load() -> ModuleType | None:
    """The compiled module, or None when it was not built for this Python or was built from another relay.c."""
    try:
        from llm_gateway.native import _relay  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _relay if source_digest() == _relay.SOURCE_DIGEST else None
