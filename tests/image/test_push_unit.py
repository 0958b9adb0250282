"""servelab push against a registry started here on loopback, for what the real local registry
cannot show: the token flow with a push scope, and a registry that answers another digest
than the bytes it was sent (it must fail the push, exit 3). test_push.py pushes to the real
registry."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab.errors import CapabilityError, ExitCode
from servelab.image.push import TestedImage, push_tested

TOKEN = "push-token"  # noqa: S105 (the fake registry's own token)
CREDS = "Basic " + base64.b64encode(b"me:pw").decode()


class _Registry(BaseHTTPRequestHandler):
    """Blobs and manifests in memory, behind a Bearer challenge that names a push scope."""

    blobs: dict[str, bytes]
    manifests: dict[str, bytes]
    scopes: list[str]
    lie: bool
    port: int

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, headers: dict[str, str] | None = None,
               body: bytes = b"") -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._reply(401, {"WWW-Authenticate":
                          f'Bearer realm="http://127.0.0.1:{self.port}/token",service="t",'
                          'scope="repository:team/app:pull,push"'})
        return False

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _digest(self, data: bytes) -> str:
        real = "sha256:" + hashlib.sha256(data).hexdigest()
        return "sha256:" + "0" * 64 if self.lie else real

    def do_GET(self) -> None:
        u = urlsplit(self.path)
        if u.path == "/token":
            scope = parse_qs(u.query).get("scope", [""])[0]
            self.scopes.append(scope)
            ok = self.headers.get("Authorization") == CREDS and "push" in scope
            self._reply(200 if ok else 401, body=json.dumps({"token": TOKEN} if ok else {})
                        .encode())
            return
        if not self._authorized():
            return
        ref = u.path.rsplit("/", 1)[1]
        if "/manifests/" in u.path and ref in self.manifests:
            body = self.manifests[ref]
            self._reply(200, {"Docker-Content-Digest": self._digest(body),
                              "Content-Type": "application/vnd.oci.image.manifest.v1+json"},
                        body)
            return
        if "/blobs/" in u.path and ref in self.blobs:
            self._reply(200, body=self.blobs[ref])
            return
        self._reply(404)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        if self._authorized():
            self._reply(202, {"Location": "/v2/team/app/blobs/uploads/u1?_state=x"})

    def do_PUT(self) -> None:
        if not self._authorized():
            return
        u = urlsplit(self.path)
        data = self._body()
        if "/blobs/uploads/" in u.path:
            digest = parse_qs(u.query)["digest"][0]
            if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
                self._reply(400, body=b'{"errors":[{"code":"DIGEST_INVALID"}]}')
                return
            self.blobs[digest] = data
            self._reply(201, {"Docker-Content-Digest": self._digest(data)})
            return
        ref = u.path.rsplit("/", 1)[1]
        self.manifests[ref] = data
        self.manifests["sha256:" + hashlib.sha256(data).hexdigest()] = data
        self._reply(201, {"Docker-Content-Digest": self._digest(data)})


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Registry]]:
    handler = type("Reg", (_Registry,), {"blobs": {}, "manifests": {}, "scopes": [],
                                         "lie": False})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SERVELAB_REGISTRY_USER", "me")
    monkeypatch.setenv("SERVELAB_REGISTRY_PASSWORD", "pw")
    yield handler
    server.shutdown()


@pytest.fixture
def tested(tmp_path: Path) -> TestedImage:
    layout = tmp_path / "layout"
    digest = write_layout(layout, [tar_bytes([E("app/model.bin", b"weights" * 100)])])
    return TestedImage("treatment", digest, archive(layout, tmp_path / "image.oci.tar"), 2)


def test_push_fetches_a_push_scoped_token_and_sends_the_bytes_as_they_are(
        registry: type[_Registry], tested: TestedImage) -> None:
    result = push_tested(tested, f"127.0.0.1:{registry.port}/team/app:v1")
    assert result.digest == tested.digest == result.top_digest
    assert registry.scopes and all("push" in s for s in registry.scopes)
    assert registry.manifests["v1"] == registry.manifests[tested.digest]
    assert hashlib.sha256(registry.manifests["v1"]).hexdigest() == tested.digest[7:]
    assert result.blobs_uploaded == len(registry.blobs) == 2  # the config and the layer


def test_a_registry_that_answers_another_digest_fails_the_push(
        registry: type[_Registry], tested: TestedImage) -> None:
    registry.lie = True
    with pytest.raises(CapabilityError, match="changed the bytes") as e:
        push_tested(tested, f"127.0.0.1:{registry.port}/team/app:v1")
    assert e.value.exit_code == ExitCode.MISSING_TOOL
