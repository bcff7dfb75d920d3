"""A Hugging Face Hub stand-in on a loopback port: one model repository served from a local folder.

It answers the calls huggingface_hub makes to read a model: its info with the file list at a commit, the
file tree snapshot_download lists, and each file at that commit (HEAD and GET, with the headers the client
reads: X-Repo-Commit, ETag and the size); any other repository gets a 404 with the Hub's RepoNotFound error
code. So the staging program runs its real download against it (HF_ENDPOINT points the client here).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.support.fake_server import FakeServer, QuietHandler

INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<revision>[^/]+))?$")
TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<revision>[^/]+)(?:/(?P<path>.*))?$")
FILE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")


class FakeHub(FakeServer):
    """Serves `folder` as repository `repo_id` at commit `sha` (any revision name resolves to it)."""

    def __init__(self, repo_id: str, folder: Path, sha: str) -> None:
        self.repo_id, self.folder, self.sha = repo_id, folder, sha
        self.files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(QuietHandler):
            def _not_found(self) -> None:
                body = json.dumps({"error": "Repository not found"}).encode()
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append((self.command, path))
                info, tree, file = INFO.match(path), TREE.match(path), FILE.match(path)
                if tree and tree["repo"] == hub.repo_id:
                    under = (tree["path"] or "").strip("/")
                    entries = [
                        {"type": "file", "path": f, "size": (hub.folder / f).stat().st_size, "oid": hub.sha}
                        for f in hub.files
                        if not under or f.startswith(under + "/")
                    ]
                    self._reply(json.dumps(entries).encode(), "application/json", head, etag=None)
                elif info and info["repo"] == hub.repo_id:
                    siblings = [{"rfilename": f} for f in hub.files]
                    body = json.dumps({"id": hub.repo_id, "modelId": hub.repo_id, "sha": hub.sha, "siblings": siblings})
                    self._reply(body.encode(), "application/json", head, etag=None)
                elif file and file["repo"] == hub.repo_id and file["path"] in hub.files:
                    data = (hub.folder / file["path"]).read_bytes()
                    self._reply(data, "application/octet-stream", head, etag=hashlib.sha256(data).hexdigest())
                else:
                    self._not_found()

            def _reply(self, body: bytes, content_type: str, head: bool, etag: str | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Repo-Commit", hub.sha)
                if etag:
                    self.send_header("ETag", f'"{etag}"')
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_GET(self) -> None:
                self._serve(head=False)

            def do_HEAD(self) -> None:
                self._serve(head=True)

        super().__init__(Handler)
