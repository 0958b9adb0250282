"""A small client for the OCI distribution API (manifests and blobs), over http(s).

API::

    ref = ImageRef.parse("127.0.0.1:5000/servelab/python-base:bookworm")
    client = RegistryClient()
    client.head_manifest(ref) -> ManifestInfo(digest, media_type, size)   # the tag's digest
    client.get_manifest(ref)  -> Manifest(body, digest, media_type)
    client.open_blob(ref, "sha256:...") -> a stream of the blob
    client.blob_exists(ref, digest) / upload_blob(ref, digest, size, opener)   # servelab push
    client.put_manifest(ref, digest_or_tag, body, media_type) -> Docker-Content-Digest

Scheme: plain http for loopback registries (127.0.0.1, localhost, ::1) and for hosts listed in
``SERVELAB_INSECURE_REGISTRIES`` (comma-separated host[:port]); https for every other host.
``docker.io`` names resolve to ``registry-1.docker.io`` with the ``library/`` prefix.

Authentication follows the distribution token flow: a request answered ``401`` with
``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` is retried with a token fetched
from the realm (``?service=...&scope=repository:NAME:pull``), sending Basic credentials when
there are some; ``Basic`` challenges are answered with the credentials directly. Credentials
come from ``SERVELAB_REGISTRY_USER``/``SERVELAB_REGISTRY_PASSWORD`` (for any host) or from the
Docker client's ``config.json`` (``$DOCKER_CONFIG`` or ``~/.docker``): ``auths`` entries and
credential helpers (``credHelpers``/``credsStore``, run as ``docker-credential-<name> get``).
Tokens and credentials are sent only to the registry and its realm, never across redirects.

Deadlines (docs/limits.md): a metadata request (manifests, blob HEAD, tokens, upload starts)
must be answered whole within ``SERVELAB_REGISTRY_TIMEOUT`` seconds (default: the client's
*timeout*), its 401 retry included; a blob stream (pull or push) fails once no byte has moved
for ``SERVELAB_STALL_TIMEOUT`` seconds (default 300), however long the whole transfer takes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias

from servelab.errors import CapabilityError, InputError, ServelabError
from servelab.image.ref import DOCKER_HUB, DOCKER_HUB_API, ImageRef, is_digest

ACCEPT = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
#: A request body: bytes, or a callable opening a fresh stream for each attempt (servelab push).
Body: TypeAlias = "bytes | Callable[[], BinaryIO] | None"
MAX_MANIFEST = 4 * 1024 * 1024


@dataclass(frozen=True)
class ManifestInfo:
    digest: str
    media_type: str
    size: int


@dataclass(frozen=True)
class Manifest:
    body: bytes
    digest: str
    media_type: str


def scheme_for(host: str) -> str:
    """http for loopback and SERVELAB_INSECURE_REGISTRIES hosts, else https."""
    bare = re.sub(r":\d+$", "", host)
    insecure = {h.strip() for h in os.environ.get("SERVELAB_INSECURE_REGISTRIES", "").split(",")}
    if bare in LOOPBACK or host in insecure or bare in insecure:
        return "http"
    return "https"


# ---------------------------------------------------------------------------- auth


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="x",service="y"`` -> ("bearer", {"realm": "x", "service": "y"})."""
    scheme, _, params = header.strip().partition(" ")
    out: dict[str, str] = {}
    for m in re.finditer(r'([A-Za-z_][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))', params):
        out[m.group(1).lower()] = m.group(2) if m.group(2) is not None else m.group(3)
    return scheme.lower(), out


def _docker_config() -> dict[str, object]:
    base = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    try:
        doc = json.loads((base / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _helper_credentials(helper: str, host: str) -> tuple[str, str] | None:
    from servelab import proc
    from servelab.errors import ServelabError

    try:
        res = proc.run([f"docker-credential-{helper}", "get"], input_text=host, timeout=30,
                       check=False)
        doc = json.loads(res.stdout) if res.returncode == 0 else {}
    except (ServelabError, ValueError):
        return None
    user, secret = doc.get("Username"), doc.get("Secret")
    return (str(user), str(secret)) if user and secret else None


def credentials_for(host: str) -> tuple[str, str] | None:
    """(user, password) for *host* from the environment or the Docker client config."""
    user = os.environ.get("SERVELAB_REGISTRY_USER")
    pw = os.environ.get("SERVELAB_REGISTRY_PASSWORD")
    if user and pw:
        return user, pw
    cfg = _docker_config()
    keys = [host, f"https://{host}", f"http://{host}"]
    if host in (DOCKER_HUB, DOCKER_HUB_API):
        keys.append("https://index.docker.io/v1/")
    helpers = cfg.get("credHelpers")
    if isinstance(helpers, dict) and host in helpers:
        return _helper_credentials(str(helpers[host]), host)
    auths = cfg.get("auths")
    if isinstance(auths, dict):
        for k in keys:
            entry = auths.get(k)
            if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
                raw = base64.b64decode(entry["auth"]).decode(errors="replace")
                u, sep, p = raw.partition(":")
                if sep:
                    return u, p
    store = cfg.get("credsStore")
    return _helper_credentials(str(store), host) if isinstance(store, str) and store else None


def _basic(creds: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()


# ---------------------------------------------------------------------------- client


class RegistryClient:
    """HEAD/GET manifests and GET blobs, with the token flow on 401."""

    def __init__(self, *, timeout: float | None = None) -> None:
        from servelab import proc

        self.timeout = proc.deadline(proc.REGISTRY_TIMEOUT_ENV, timeout or proc.REGISTRY_TIMEOUT_S)
        self.stall = proc.deadline(proc.STALL_TIMEOUT_ENV, proc.STALL_TIMEOUT_S)
        self._auth: dict[tuple[str, str], str] = {}

    def _url(self, ref: ImageRef, kind: str, what: str) -> str:
        return f"{scheme_for(ref.api_host)}://{ref.api_host}/v2/{ref.repository}/{kind}/{what}"

    def _request(self, method: str, url: str, ref: ImageRef,
                 accept: str | None = None, *, body: Body = None,
                 headers: Mapping[str, str] | None = None,
                 allow: tuple[int, ...] = (), stream: bool = False
                 ) -> urllib.response.addinfourl:
        """One request, retried once after a 401 with credentials; a status in *allow* is
        returned as the response instead of raised. *body* may be a callable that opens a
        fresh stream, so that the retry sends the bytes again. Both attempts share one
        deadline (:attr:`timeout`); a *stream* waits up to :attr:`stall` for each byte."""
        key = (ref.api_host, ref.repository)
        end = time.monotonic() + self.timeout
        for attempt in range(2):
            wait = self.stall if stream else self._left(end, ref)
            data = body() if callable(body) else body
            req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (http/https only)
            if accept:
                req.add_header("Accept", accept)
            for name, value in (headers or {}).items():
                req.add_header(name, value)
            if key in self._auth:
                req.add_unredirected_header("Authorization", self._auth[key])
            try:
                return urllib.request.urlopen(req, timeout=wait)  # type: ignore[no-any-return]  # noqa: S310
            except urllib.error.HTTPError as e:
                if e.code == 401 and attempt == 0 and self._authenticate(e, ref):
                    e.close()
                    continue
                if e.code in allow:
                    return e
                raise self._http_error(e, ref, url) from e
            except (urllib.error.URLError, OSError) as e:
                if isinstance(getattr(e, "reason", e), TimeoutError):
                    raise self._timed_out(ref, wait, stream) from e
                raise CapabilityError(
                    f"registry {ref.api_host} is not reachable: {getattr(e, 'reason', e)}",
                    hint="check the registry address and that it is running "
                    "(http is used only for loopback and SERVELAB_INSECURE_REGISTRIES)",
                ) from e
            finally:
                if callable(body) and data is not None and not isinstance(data, bytes):
                    data.close()
        raise AssertionError("unreachable")

    def _left(self, end: float, ref: ImageRef) -> float:
        left = end - time.monotonic()
        if left <= 0:
            raise self._timed_out(ref, self.timeout, False)
        return left

    def _timed_out(self, ref: ImageRef, seconds: float, stream: bool) -> CapabilityError:
        from servelab import proc

        if stream:
            return CapabilityError(
                f"registry {ref.api_host} sent or took no byte for {seconds:g} s",
                hint=f"check the registry; {proc.STALL_TIMEOUT_ENV} (seconds) sets how long a "
                "transfer may stall")
        return CapabilityError(
            f"registry {ref.api_host} did not answer within {seconds:g} s",
            hint=f"check that the registry is running; {proc.REGISTRY_TIMEOUT_ENV} (seconds) "
            "sets the deadline of one registry request")

    def _read(self, r: urllib.response.addinfourl, limit: int, ref: ImageRef,
              started: float) -> bytes:
        """At most *limit* bytes of a metadata answer, the whole read within the deadline
        (a registry that sends one byte a second would else hold each socket read open)."""
        end = started + self.timeout
        read = getattr(r, "read1", r.read)  # read1: what one socket read gives, never waits more
        chunks: list[bytes] = []
        got = 0
        while got < limit:
            self._left(end, ref)
            try:
                chunk = read(min(65536, limit - got))
            except TimeoutError as e:
                raise self._timed_out(ref, self.timeout, False) from e
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _authenticate(self, err: urllib.error.HTTPError, ref: ImageRef) -> bool:
        scheme, params = parse_challenge(err.headers.get("WWW-Authenticate", ""))
        creds = credentials_for(ref.registry)
        key = (ref.api_host, ref.repository)
        if scheme == "basic" and creds:
            self._auth[key] = _basic(creds)
            return True
        if scheme != "bearer" or "realm" not in params:
            return False
        token = self._fetch_token(params, ref, creds)
        if token:
            self._auth[key] = "Bearer " + token
        return bool(token)

    def _fetch_token(self, params: dict[str, str], ref: ImageRef,
                     creds: tuple[str, str] | None) -> str | None:
        realm = params["realm"]
        if urllib.parse.urlsplit(realm).scheme not in ("http", "https"):
            return None
        query = {"scope": params.get("scope") or f"repository:{ref.repository}:pull"}
        if "service" in params:
            query["service"] = params["service"]
        req = urllib.request.Request(realm + "?" + urllib.parse.urlencode(query))  # noqa: S310
        if creds:
            req.add_unredirected_header("Authorization", _basic(creds))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310
                doc = json.loads(r.read(1024 * 1024))
        except (urllib.error.URLError, OSError, ValueError):
            return None
        tok = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        return str(tok) if tok else None

    def _http_error(self, e: urllib.error.HTTPError, ref: ImageRef, url: str) -> Exception:
        if e.code in (401, 403):
            return InputError(
                f"registry {ref.api_host} refused access to {ref.repository} (HTTP {e.code})",
                hint="log in (docker login) or set SERVELAB_REGISTRY_USER and "
                "SERVELAB_REGISTRY_PASSWORD",
            )
        if e.code == 404:
            return InputError(f"{ref} was not found in the registry (HTTP 404 for {url})",
                              hint="check the name and tag, or push the image first")
        return CapabilityError(f"registry {ref.api_host} answered HTTP {e.code} for {url}",
                               hint="retry later or check the registry's logs")

    def head_manifest(self, ref: ImageRef) -> ManifestInfo:
        """The digest the registry reports for *ref* (the index digest for a multi-arch tag)."""
        url = self._url(ref, "manifests", ref.reference)
        with self._request("HEAD", url, ref, ACCEPT) as r:
            digest = r.headers.get("Docker-Content-Digest")
            mtype = r.headers.get("Content-Type", "")
            size = int(r.headers.get("Content-Length") or 0)
        if digest and is_digest(digest):
            return ManifestInfo(digest, mtype, size)
        got = self.get_manifest(ref)  # registries may omit the header on HEAD
        return ManifestInfo(got.digest, got.media_type, len(got.body))

    def get_manifest(self, ref: ImageRef) -> Manifest:
        """The manifest bytes of *ref*; their sha256 is checked against a requested digest."""
        url = self._url(ref, "manifests", ref.reference)
        started = time.monotonic()
        with self._request("GET", url, ref, ACCEPT) as r:
            body = self._read(r, MAX_MANIFEST + 1, ref, started)
            header = r.headers.get("Docker-Content-Digest")
            mtype = r.headers.get("Content-Type", "")
        if len(body) > MAX_MANIFEST:
            raise InputError(f"{ref}: manifest over {MAX_MANIFEST} bytes")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if ref.digest and ref.digest != digest:
            raise InputError(f"{ref}: the registry's manifest has digest {digest}",
                             hint="the registry returned other bytes than the pinned digest")
        if header and header != digest and header.startswith("sha256:"):
            raise InputError(f"{ref}: Docker-Content-Digest {header} does not match the "
                             f"manifest bytes ({digest})")
        return Manifest(body, digest, mtype)

    def delete_manifest(self, ref: ImageRef) -> None:
        """Delete the manifest *ref* names by digest (the registry must allow deletes)."""
        if ref.digest is None:
            raise InputError(f"{ref}: a manifest is deleted by digest, not by tag")
        with self._request("DELETE", self._url(ref, "manifests", ref.digest), ref):
            pass

    def open_blob(self, ref: ImageRef, digest: str) -> BinaryIO:
        """A stream of blob *digest* of *ref*'s repository (redirects followed, no auth sent)."""
        url = self._url(ref, "blobs", digest)
        return self._request("GET", url, ref, stream=True)  # type: ignore[return-value]

    # ------------------------------------------------------------------ upload (servelab push)

    def blob_exists(self, ref: ImageRef, digest: str) -> bool:
        """Whether the repository already has blob *digest* (HEAD; 404 is False)."""
        with self._request("HEAD", self._url(ref, "blobs", digest), ref, allow=(404,)) as r:
            return (r.status or 0) == 200

    def mount_blob(self, ref: ImageRef, digest: str, source: str) -> bool:
        """Link blob *digest* of repository *source* (same registry) into *ref*'s
        repository, no bytes sent (the distribution API's cross-repository mount). False
        when the registry declined (it lacks the blob there, or mounts nothing): its upload
        session is cancelled and the caller uploads."""
        url = self._url(ref, "blobs", "uploads/") + "?" + urllib.parse.urlencode(
            {"mount": digest, "from": source})
        with self._request("POST", url, ref, body=b"", headers={"Content-Length": "0"}) as r:
            if r.status == 201:
                return True
            location = r.headers.get("Location") or ""
        cancel = urllib.parse.urljoin(url, location)
        if location and urllib.parse.urlsplit(cancel).netloc == urllib.parse.urlsplit(url).netloc:
            with contextlib.suppress(ServelabError):
                self._request("DELETE", cancel, ref, allow=(404, 405)).close()
        return False

    def upload_blob(self, ref: ImageRef, digest: str, size: int,
                    opener: Callable[[], BinaryIO]) -> str:
        """Upload one blob monolithically (POST, then PUT ?digest=); the registry checks the
        bytes against *digest*. Returns the Docker-Content-Digest it answered."""
        start = self._url(ref, "blobs", "uploads/")
        with self._request("POST", start, ref, body=b"",
                           headers={"Content-Length": "0"}) as r:
            location = r.headers.get("Location") or ""
        url = urllib.parse.urljoin(start, location)
        if not location or urllib.parse.urlsplit(url).netloc != urllib.parse.urlsplit(start).netloc:
            raise CapabilityError(
                f"registry {ref.api_host} gave no upload location on its own host "
                f"({location!r})", hint="push to a registry that implements the OCI "
                "distribution API's monolithic upload")
        url += ("&" if urllib.parse.urlsplit(url).query else "?") + urllib.parse.urlencode(
            {"digest": digest})
        with self._request("PUT", url, ref, body=opener, headers={
                "Content-Type": "application/octet-stream",
                "Content-Length": str(size)}, stream=True) as r:
            return str(r.headers.get("Docker-Content-Digest") or "")

    def put_manifest(self, ref: ImageRef, reference: str, body: bytes,
                     media_type: str) -> str:
        """PUT a manifest or index, byte for byte, under *reference* (a digest or a tag).
        Returns the registry's Docker-Content-Digest (empty when it sent none)."""
        url = self._url(ref, "manifests", reference)
        with self._request("PUT", url, ref, body=body, headers={
                "Content-Type": media_type, "Content-Length": str(len(body))}) as r:
            return str(r.headers.get("Docker-Content-Digest") or "")
