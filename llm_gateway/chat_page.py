"""The chat page (CHAT_PAGE=on): one self-contained HTML file that streams from /v1/chat/completions.

Its script and style are inline and nothing is loaded from elsewhere (the page works offline). The
Content-Security-Policy allows exactly those inline blocks, by hash, and requests to this origin only,
so the page can run nothing but its own code.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from pathlib import Path

from common.http.asgi import Send

PAGE_FILE = Path(__file__).with_name("chat_page.html")


def _hashes(html: str, tag: str) -> str:
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.DOTALL)
    return " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() + "'" for block in blocks
    )


@cache
def page() -> tuple[bytes, bytes]:
    """The page's bytes and its Content-Security-Policy (read once)."""
    html = PAGE_FILE.read_text(encoding="utf-8")
    policy = (
        f"default-src 'none'; script-src {_hashes(html, 'script')}; style-src {_hashes(html, 'style')}; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return html.encode(), policy.encode()


async def send_page(send: Send) -> None:
    """Answer with the chat page."""
    body, policy = page()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"content-security-policy", policy),
                (b"x-content-type-options", b"nosniff"),
                (b"cache-control", b"no-cache"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
