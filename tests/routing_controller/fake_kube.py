"""A Kubernetes API server stand-in on a loopback port: serves the few paths the controller calls
from in-memory objects and records every request, so tests drive the real `kubernetes` client."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.fake_server import FakeServer, QuietHandler


class FakeKube(FakeServer):
    """Objects by API path; `requests` holds (method, path, headers, body) of each call."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.lists: dict[str, list[dict[str, Any]]] = {}  # collection path -> items (label-filtered)
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.missing: set[str] = set()  # collection paths that answer 404 (a CRD that is not installed)
        fake = self

        class Handler(QuietHandler):
            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length", 0))
                return json.loads(self.rfile.read(length)) if length else None

            def do_GET(self) -> None:
                url = urlparse(self.path)
                fake.requests.append(("GET", self.path, dict(self.headers), None))
                if url.path in fake.missing:
                    self._reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                elif url.path in fake.objects:
                    self._reply(200, fake.objects[url.path])
                elif url.path in fake.lists:
                    selector = parse_qs(url.query).get("labelSelector", [""])[0]
                    wanted = dict(p.split("=", 1) for p in selector.split(",") if p)
                    items = [
                        i for i in fake.lists[url.path] if wanted.items() <= i["metadata"].get("labels", {}).items()
                    ]
                    self._reply(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})
                else:
                    self._reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

            def do_PATCH(self) -> None:
                body = self._body()
                fake.requests.append(("PATCH", self.path, dict(self.headers), body))
                target = fake.objects.get(urlparse(self.path).path)
                if target is None or self.headers.get("Content-Type") != "application/merge-patch+json":
                    self._reply(415 if target is not None else 404, {"kind": "Status"})
                    return
                target["metadata"]["annotations"].update(body["metadata"]["annotations"])
                self._reply(200, target)

            def do_POST(self) -> None:
                body = self._body()
                fake.requests.append(("POST", self.path, dict(self.headers), body))
                body.setdefault("metadata", {})["name"] = body["metadata"].get("generateName", "x") + "abcde"
                self._reply(201, body)

        super().__init__(Handler)

    def calls(self, method: str) -> list[tuple[str, str, dict[str, str], Any]]:
        """The recorded requests of one method."""
        return [r for r in self.requests if r[0] == method]
