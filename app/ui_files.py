"""Keep the server's filesystem out of the UI's results: image links name the file under Gradio's cache.

Gradio 6.31 answers an output image as a FileData whose `path` is the absolute file under
GRADIO_TEMP_DIR and whose `url` is `<root>/gradio_api/file=<that path>` (processing_utils
`move_files_to_cache`). The page shows the image from `url`; gradio_client downloads it from
`file=<path>` (gradio_client 2.x `Client._download_file`). This wrapper drops the cache directory from
both in the responses that carry results (the queue's event stream and the predict route) and in the
file route's refusals, and puts it back on the way in, so `/gradio_api/file=<hash>/image.png` serves the
same file as before.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FILE_PREFIX = "/gradio_api/file="  # gradio 6.31 routes.py `/file={path_or_url:path}`
RESULT_PATHS = frozenset({"/gradio_api/queue/data", "/gradio_api/run/predict"})


class HideCacheDir:
    """ASGI wrapper: results name files relative to `cache_dir`; file links relative to it are served."""

    def __init__(self, app: ASGIApp, cache_dir: str) -> None:
        self.app = app
        self._prefix = cache_dir.rstrip("/") + "/"
        self._prefix_bytes = self._prefix.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(FILE_PREFIX):
            if not path.removeprefix(FILE_PREFIX).startswith("/"):
                full = FILE_PREFIX + self._prefix + path.removeprefix(FILE_PREFIX)
                scope = {**scope, "path": full, "raw_path": full.encode()}
            # Gradio's refusal of a missing or expired file echoes the path it looked at.
            await self.app(scope, receive, self._stripping(send, errors_only=True))
            return
        if path.rstrip("/") in RESULT_PATHS:
            await self.app(scope, receive, self._stripping(send, errors_only=False))
            return
        await self.app(scope, receive, send)

    def _stripping(self, send: Send, errors_only: bool) -> Send:
        """`send`, with the cache directory taken out of the response body (of an error only, if asked)."""
        strip = not errors_only

        async def send_without_cache_dir(message: Message) -> None:
            nonlocal strip
            if message["type"] == "http.response.start":
                strip = strip or message["status"] >= 400
                if strip:
                    # The body gets shorter: drop the length, the server sends it chunked instead.
                    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
                    message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and strip:
                # Gradio sends each JSON answer and each event-stream message in one piece.
                message = {**message, "body": message.get("body", b"").replace(self._prefix_bytes, b"")}
            await send(message)

        return send_without_cache_dir


def hide_cache_dir(app: FastAPI, cache_dir: str) -> None:
    """Wrap the Gradio app that `gr.mount_gradio_app(app, ..., path="/")` mounted."""
    (mount,) = [route for route in app.router.routes if isinstance(route, Mount) and route.path == ""]
    mount.app = HideCacheDir(mount.app, cache_dir)
