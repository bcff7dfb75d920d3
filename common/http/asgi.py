"""The ASGI callable types the shared HTTP pieces and the gateway (no web framework: it only forwards) are written
against; Starlette's are the same shapes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
