"""The registry client: reference parsing, challenges, and the token flow against a loopback
server started here (the real local registry has no auth; see test_build_docker.py for it)."""

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

from servelab.errors import CapabilityError, InputError
from servelab.image.ref import ImageRef
from servelab.image.registry import (
    RegistryClient,
    credentials_for,
    parse_challenge,
    scheme_for,
)

D = "sha256:" + "a" * 64


@pytest.mark.parametrize(("text", "want"), [
    ("python", ("docker.io", "library/python", None, None)),
    ("python:3.12-slim", ("docker.io", "library/python", "3.12-slim", None)),
    ("user/app:1", ("docker.io", "user/app", "1", None)),
    ("ghcr.io/org/app:v2@" + D, ("ghcr.io", "org/app", "v2", D)),
    ("127.0.0.1:5000/servelab/python-base:bookworm",
     ("127.0.0.1:5000", "servelab/python-base", "bookworm", None)),
    ("localhost/app", ("localhost", "app", None, None)),
    ("localhost:5000/a/b@" + D, ("localhost:5000", "a/b", None, D)),
])
def test_reference_parse(text: str, want: tuple[str, str, str | None, str | None]) -> None:
    r = ImageRef.parse(text)
    assert (r.registry, r.repository, r.tag, r.digest) == want


@pytest.mark.parametrize("bad", ["UPPER/case", "app@sha256:short", "app:bad tag", "a//b", ""])
def test_reference_parse_rejects(bad: str) -> None:
    with pytest.raises(InputError, match="invalid image reference"):
        ImageRef.parse(bad)


def test_api_host_and_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ImageRef.parse("python").api_host == "registry-1.docker.io"
    assert scheme_for("127.0.0.1:5000") == "http"
    assert scheme_for("localhost") == "http"
    assert scheme_for("[::1]:5000") == "http"
    assert scheme_for("registry.example:5000") == "https"
    monkeypatch.setenv("SERVELAB_INSECURE_REGISTRIES", "registry.example:5000, other")
    assert scheme_for("registry.example:5000") == "http"
    assert scheme_for("other:443") == "http"


def test_parse_challenge_of_docker_hub() -> None:
    # the header Docker Hub sends (documented in the distribution token spec)
    h = ('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
         'scope="repository:library/python:pull"')
    assert parse_challenge(h) == ("bearer", {
        "realm": "https://auth.docker.io/token", "service": "registry.docker.io",
        "scope": "repository:library/python:pull"})
    assert parse_challenge('Basic realm="Registry Realm"') == ("basic", {"realm": "Registry Realm"})


def test_credentials_from_docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_REGISTRY_USER", raising=False)
    monkeypatch.delenv("SERVELAB_REGISTRY_PASSWORD", raising=False)
    auth = base64.b64encode(b"me:s3cret").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"reg.example": {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert credentials_for("reg.example") == ("me", "s3cret")
    assert credentials_for("other.example") is None
    monkeypatch.setenv("SERVELAB_REGISTRY_USER", "env")
    monkeypatch.setenv("SERVELAB_REGISTRY_PASSWORD", "pw")
    assert credentials_for("other.example") == ("env", "pw")


# ---------------------------------------------------------------------------- token flow

MANIFEST = json.dumps({"schemaVersion": 2, "mediaType":
                       "application/vnd.oci.image.manifest.v1+json"}).encode()
MDIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class _Fake(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]
    port: int

    def log_message(self, *args: Any) -> None:
        pass

    def _auth_ok(self) -> bool:
        return self.headers.get("Authorization") == "Bearer tok123"

    def _challenge(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate",
                         f'Bearer realm="http://127.0.0.1:{self.port}/token",service="fake",'
                         'scope="repository:team/app:pull"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        u = urlsplit(self.path)
        self.seen.append({"path": u.path, "query": parse_qs(u.query),
                          "auth": self.headers.get("Authorization"),
                          "accept": self.headers.get("Accept")})
        if u.path == "/token":
            good = "Basic " + base64.b64encode(b"me:pw").decode()
            ok = self.headers.get("Authorization") == good
            body = json.dumps({"token": "tok123"} if ok else {}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if u.path == "/storage/blob":
            self.send_response(200)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"BLOB")
            return
        if not self._auth_ok():
            self._challenge()
            return
        if u.path.startswith("/v2/team/app/blobs/"):
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{self.port}/storage/blob")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if u.path.startswith("/v2/team/app/manifests/"):
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Docker-Content-Digest", MDIGEST)
            self.send_header("Content-Length", str(len(MANIFEST)))
            self.end_headers()
            if not head:
                self.wfile.write(MANIFEST)
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def fake_registry() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("H", (_Fake,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.port = server.server_address[1]
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"127.0.0.1:{handler.port}", seen
    server.shutdown()
    server.server_close()


def test_bearer_token_flow(fake_registry: tuple[str, list[dict[str, Any]]],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    host, seen = fake_registry
    monkeypatch.setenv("SERVELAB_REGISTRY_USER", "me")
    monkeypatch.setenv("SERVELAB_REGISTRY_PASSWORD", "pw")
    client = RegistryClient()
    ref = ImageRef.parse(f"{host}/team/app:1.0")
    info = client.head_manifest(ref)
    assert info.digest == MDIGEST
    token_calls = [s for s in seen if s["path"] == "/token"]
    assert token_calls[0]["query"] == {"scope": ["repository:team/app:pull"], "service": ["fake"]}
    assert seen[-1]["auth"] == "Bearer tok123"
    assert "application/vnd.oci.image.index.v1+json" in seen[-1]["accept"]
    got = client.get_manifest(ref)
    assert got.body == MANIFEST and got.digest == MDIGEST
    with client.open_blob(ref, D) as blob:
        assert blob.read() == b"BLOB"
    # the token is never sent across the redirect to the storage URL
    assert [s["auth"] for s in seen if s["path"] == "/storage/blob"] == [None]


def test_refused_without_credentials(fake_registry: tuple[str, list[dict[str, Any]]],
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host, _ = fake_registry
    monkeypatch.delenv("SERVELAB_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    with pytest.raises(InputError, match="refused access"):
        RegistryClient().head_manifest(ImageRef.parse(f"{host}/team/app:1.0"))


def test_pinned_digest_mismatch_is_refused(fake_registry: tuple[str, list[dict[str, Any]]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    host, _ = fake_registry
    monkeypatch.setenv("SERVELAB_REGISTRY_USER", "me")
    monkeypatch.setenv("SERVELAB_REGISTRY_PASSWORD", "pw")
    ref = ImageRef.parse(f"{host}/team/app:1.0").with_digest(D)
    with pytest.raises(InputError, match="other bytes than the pinned digest"):
        RegistryClient().get_manifest(ref)


def test_unreachable_registry_is_a_capability_error() -> None:
    with pytest.raises(CapabilityError, match="not reachable"):
        RegistryClient(timeout=2).head_manifest(ImageRef.parse("127.0.0.1:9/x/y:1"))
