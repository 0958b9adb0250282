"""The one image-reference type and the one digest pattern of servelab.

Every module that names an image or checks a digest uses this module: a digest-format fix goes
here and nowhere else.

API::

    DIGEST                      # compiled: sha256:<64 hex> or sha512:<128 hex>, nothing around
    is_digest("sha256:...")     -> True when the whole text is a digest
    pinned_digest("img@sha256:...") -> "sha256:..." (the digest a reference is pinned to) or None
    ImageRef.parse("127.0.0.1:5000/team/app:1.0@sha256:...")   # strict, like the Docker client
    ImageRef.split("${BASE}:latest")  -> (name, tag, digest), lenient (Dockerfile/manifest text)

``ImageRef.parse`` raises :class:`~servelab.errors.InputError` (exit 2) with a fix for a
malformed reference; ``ImageRef.split`` never raises and is meant for text that may still hold
unresolved variables (``FROM ${BASE}``, ``image: $(IMAGE)``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from servelab.errors import InputError

#: The digest pattern, without anchors, for use inside larger patterns.
DIGEST_PATTERN = r"(?:sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})"
#: A whole digest and nothing else (use ``DIGEST.fullmatch``).
DIGEST = re.compile(DIGEST_PATTERN)
_PINNED = re.compile(rf"@({DIGEST_PATTERN})$")
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DIGEST_HINT = "expected sha256:<64 lowercase hex digits>"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")


def is_digest(text: str) -> bool:
    """Whether *text* is exactly one well-formed digest (``sha256:`` + 64 lowercase hex)."""
    return DIGEST.fullmatch(text) is not None


def pinned_digest(ref: str) -> str | None:
    """The digest *ref* is pinned to (``name[:tag]@sha256:...``), else None."""
    m = _PINNED.search(ref.strip())
    return m.group(1) if m else None


def check_digest(digest: str, where: str = "") -> str:
    """*digest* if it is well formed, else :class:`InputError` naming *where*."""
    if not is_digest(digest):
        raise InputError(f"{where + ': ' if where else ''}malformed digest {digest!r}",
                         hint=DIGEST_HINT)
    return digest


class ImageRef(NamedTuple):
    """An image reference split into registry host, repository, tag and digest."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        """Parse ``[host[:port]/]name[:tag][@sha256:...]`` like the Docker client does."""
        rest, _, digest = text.strip().partition("@")
        if digest and not is_digest(digest):
            raise _bad_ref(text, f"malformed digest {digest!r}")
        first, slash, remainder = rest.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            host, path = first, remainder
        else:
            host, path = DOCKER_HUB, rest
        tag = None
        name, colon, maybe_tag = path.rpartition(":")
        if colon and "/" not in maybe_tag:
            path, tag = name, maybe_tag
            if not _TAG.match(tag):
                raise _bad_ref(text, f"malformed tag {tag!r}")
        if host == DOCKER_HUB and "/" not in path:
            path = "library/" + path
        if not _NAME.match(path):
            raise _bad_ref(text, f"malformed repository name {path!r}")
        return cls(host, path, tag, digest or None)

    @staticmethod
    def split(text: str) -> tuple[str, str | None, str | None]:
        """(name, tag, digest) of a reference as written, without validating any part.

        A ``:`` after the last ``/`` starts the tag (so ``host:5000/app`` has no tag).
        """
        name, _, digest = text.strip().partition("@")
        slash = name.rfind("/")
        colon = name.rfind(":")
        if colon > slash:
            return name[:colon], name[colon + 1:], digest or None
        return name, None, digest or None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def reference(self) -> str:
        """What goes after /manifests/: the digest when there is one, else the tag."""
        return self.digest or self.tag or "latest"

    def with_digest(self, digest: str) -> ImageRef:
        return ImageRef(self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def _bad_ref(text: str, why: str) -> InputError:
    return InputError(f"invalid image reference {text!r}: {why}",
                      hint="write [host[:port]/]name[:tag][@sha256:<64 hex>]")
