"""Push the image a servelab run tested to a registry, byte for byte.

API::

    tested = tested_image(Path("servelab-out/run-x"), arm="treatment")   # -> TestedImage
    result = push_tested(tested, "ghcr.io/org/app:pr-12")               # -> PushResult
    result.ref          # "ghcr.io/org/app@sha256:..." (the tested digest, as the registry has it)

What is pushed is the OCI archive the run kept (``OUT/images/<hex>.oci.tar``), not a re-export
of the engine's copy, which may recompress layers and so change the digest: every blob is sent
as it is in the archive (its sha256 checked while it streams), and every manifest and index
byte for byte, children before parents, each by digest; the tag (if any) last. The registry's
``Docker-Content-Digest`` for every manifest must equal the archive's digest, and a final HEAD
by digest must find the tested digest: otherwise the push fails (exit 3).

Refusals (before anything is sent):

* an arm whose repeats gave different digests, or whose reproducibility verdict is false
  (:class:`NotReproducible`, exit 1): which of them would be "the" tested image?
* an arm some of whose repeats have no built image (failed build, prebuilt image, no build
  stage), or whose archive is not in the run directory (exit 2);
* a target that carries a digest (``name@sha256:...``): the digest is the tested one (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from servelab import logs
from servelab.errors import CapabilityError, GateFailed, InputError, UsageError
from servelab.image.oci import INDEX_TYPES, Descriptor, ImageSource, OciArchive
from servelab.image.ref import ImageRef, check_digest, is_digest
from servelab.image.registry import RegistryClient

MAX_MANIFEST_BYTES = 4 * 1024 * 1024


class NotReproducible(GateFailed):
    """The arm's repeats did not all give one digest: there is no single tested image."""


@dataclass(frozen=True)
class TestedImage:
    """The image one arm of a run tested: one digest over every repeat, and its archive."""

    __test__ = False  # not a pytest test class, despite the name

    arm: str
    digest: str
    archive: Path
    repeats: int
    verdict: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "digest": self.digest, "archive": str(self.archive),
                "repeats": self.repeats, "verdict": self.verdict}


@dataclass(frozen=True)
class PushResult:
    """Where the tested image now is, and what it took to put it there."""

    repository: str
    tag: str | None
    digest: str
    top_digest: str
    blobs_uploaded: int
    blobs_present: int
    bytes_uploaded: int
    manifests: list[str] = field(default_factory=list)
    #: blobs linked from another repository of the registry (no bytes sent)
    blobs_mounted: int = 0

    @property
    def ref(self) -> str:
        return f"{self.repository}@{self.digest}"

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "repository": self.repository, "tag": self.tag,
                "digest": self.digest, "top_digest": self.top_digest,
                "manifests": list(self.manifests), "blobs_uploaded": self.blobs_uploaded,
                "blobs_present": self.blobs_present, "blobs_mounted": self.blobs_mounted,
                "bytes_uploaded": self.bytes_uploaded}


# ---------------------------------------------------------------------------- the run's image


_RUN_HINT = "pass the --out directory of servelab run (the action's results-dir output)"
#: an arm's name as servelab writes it: a directory name inside the run directory
_ARM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def _load_summary(results_dir: Path) -> dict[str, Any]:
    """summary.json through the safe reader and its schema (servelab.run.results)."""
    from servelab.spec import read_summary

    return read_summary(
        results_dir / "summary.json",
        missing=f"{results_dir / 'summary.json'} is missing: not a servelab run directory")


def _check_arm(results_dir: Path, arm: str, summary: dict[str, Any]) -> None:
    """--arm names an arm of this run, as a plain name: never a path out of the run."""
    arms = [str(a) for a in summary.get("arms") or []] or ["control", "treatment"]
    if not _ARM_RE.match(arm) or ".." in arm:
        raise UsageError(f"--arm {arm!r} is not an arm name",
                         hint=f"give one of this run's arms: {', '.join(arms)}")
    if arm not in arms:
        raise UsageError(f"--arm {arm!r}: the run in {results_dir} has no such arm",
                         hint=f"give one of its arms: {', '.join(arms)}")


def _inside(results_dir: Path, path: Path) -> bool:
    """*path*, symlinks resolved, lies inside the run directory."""
    root = os.path.realpath(results_dir)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _repeat_results(results_dir: Path, arm: str) -> list[dict[str, Any]]:
    from servelab.spec import read_result

    paths = sorted((p for p in results_dir.glob(f"{arm}/repeat-*/result.json")
                    if p.parent.name.partition("-")[2].isdigit()),
                   key=lambda p: int(p.parent.name.partition("-")[2]))
    if not paths:
        raise InputError(f"{results_dir} has no {arm}/repeat-<n>/result.json",
                         hint="name an arm the run built (--arm), or " + _RUN_HINT)
    outside = [p for p in paths if not _inside(results_dir, p)]
    if outside:
        raise InputError(f"{outside[0]} leads out of the run directory (a symbolic link)",
                         hint="push from the run's own --out directory, as servelab wrote it")
    return [read_result(p) for p in paths]


def _digest_of(result: dict[str, Any], arm: str) -> str:
    image = result.get("image") if isinstance(result.get("image"), dict) else {}
    digest = str((image or {}).get("digest") or "")
    build = ((result.get("stages") or {}).get("build") or {})
    if not digest or build.get("status") != "ok":
        raise InputError(
            f"the {arm} arm's repeat {result.get('repeat', '?')} has no image built by this run "
            f"(build: {build.get('status') or 'not run'})",
            hint="push only what servelab built and tested: run the build stage, and push "
            "after a run whose builds all succeeded")
    return check_digest(digest, f"{arm} repeat {result.get('repeat', '?')}")


def _check_reproducible(summary: dict[str, Any], arm: str, digests: list[str]) -> None:
    distinct = sorted(set(digests))
    rep = (summary.get("reproducibility") or {}).get(arm) or {}
    if len(distinct) > 1 or rep.get("reproducible") is False:
        raise NotReproducible(
            f"the {arm} arm is not reproducible: {len(digests)} repeats gave "
            f"{len(distinct)} digests ({', '.join(d[:19] + '…' for d in distinct)}); "
            "servelab push ships only an image every repeat built alike",
            hint="make the build reproducible (summary.md explains what differed) and run "
            "again")


def _archive_for(results_dir: Path, results: list[dict[str, Any]], digest: str) -> Path:
    kept = results_dir / "images" / f"{digest.partition(':')[2]}.oci.tar"
    if kept.is_file() and _inside(results_dir, kept):
        return kept
    for res in results:  # a run directory moved since: the recorded name, inside it only
        record = (((res.get("stages") or {}).get("build") or {}).get("record") or {})
        recorded = Path(str(record.get("archive") or ""))
        if record.get("archive") and recorded.is_file() and _inside(results_dir, recorded):
            return recorded
    raise InputError(
        f"the OCI archive of {digest} is not in {results_dir / 'images'}",
        hint="push from the run's own --out directory (servelab keeps one archive per "
        "digest in images/); a copy must keep images/<hex>.oci.tar")


def tested_image(results_dir: Path, arm: str = "treatment") -> TestedImage:
    """The one image *arm* was tested as, or the reason there is none (see the module)."""
    if not results_dir.is_dir():
        raise InputError("not a directory: not a servelab run directory", file=str(results_dir),
                         hint=_RUN_HINT)
    summary = _load_summary(results_dir)
    _check_arm(results_dir, arm, summary)
    results = _repeat_results(results_dir, arm)
    digests = [_digest_of(r, arm) for r in results]
    _check_reproducible(summary, arm, digests)
    archive = _archive_for(results_dir, results, digests[0])
    verdict = summary.get("verdict")
    return TestedImage(arm, digests[0], archive, len(results),
                       str(verdict) if verdict is not None else None)


# ---------------------------------------------------------------------------- the push plan


@dataclass
class PushPlan:
    """Blobs to send, then manifests (children first, each with its bytes), then the top."""

    blobs: list[Descriptor] = field(default_factory=list)
    manifests: list[tuple[Descriptor, bytes]] = field(default_factory=list)
    top: Descriptor | None = None


def _media_type(desc: Descriptor, doc: dict[str, Any]) -> str:
    return str(doc.get("mediaType") or desc.media_type)


def _walk(img: ImageSource, desc: Descriptor, plan: PushPlan, seen: set[str],
          depth: int = 0) -> set[str]:
    """Add *desc* and everything under it to *plan*; the manifest digests found under it."""
    if depth > 4:
        raise InputError(f"{img.name}: indexes nested too deeply")
    body = img.read_blob(desc.digest, MAX_MANIFEST_BYTES)
    doc = json.loads(body)
    found = {desc.digest}
    if not isinstance(doc, dict):
        raise InputError(f"{img.name}: {desc.digest} is not a JSON object")
    if _media_type(desc, doc) in INDEX_TYPES or "manifests" in doc:
        for i, raw in enumerate(doc.get("manifests") or []):
            child = Descriptor.parse(raw, f"{img.name}: {desc.digest} manifests[{i}]")
            found |= _walk(img, child, plan, seen, depth + 1)
    else:
        parts = [doc.get("config"), *(doc.get("layers") or [])]
        for i, raw in enumerate(parts):
            blob = Descriptor.parse(raw, f"{img.name}: {desc.digest} blob {i}")
            if blob.digest not in seen:
                seen.add(blob.digest)
                plan.blobs.append(blob)
    typed = Descriptor(_media_type(desc, doc), desc.digest, len(body))
    if desc.digest not in seen:
        seen.add(desc.digest)
        plan.manifests.append((typed, body))
    return found


def plan_push(img: ImageSource, digest: str) -> PushPlan:
    """The push plan of the entry of index.json that is, or holds, manifest *digest*."""
    _, index = img.top()
    for i, raw in enumerate(index.get("manifests") or []):
        desc = Descriptor.parse(raw, f"{img.name}: index.json manifests[{i}]")
        plan = PushPlan()
        if digest in _walk(img, desc, plan, set()):
            plan.top = plan.manifests[-1][0]
            return plan
    raise InputError(f"{img.name} does not hold the tested manifest {digest}",
                     hint="the run directory was changed after the run; run again")


# ---------------------------------------------------------------------------- the push


class _Verified:
    """A blob stream that hashes what it yields and refuses, at its end, the wrong bytes."""

    def __init__(self, raw: Any, desc: Descriptor, name: str) -> None:
        self._raw = raw
        self._desc = desc
        self._name = name
        self._hash = hashlib.sha256()
        self._count = 0

    def read(self, n: int = -1) -> bytes:
        data = bytes(self._raw.read(n))
        self._hash.update(data)
        self._count += len(data)
        if not data or (n < 0):
            self._check()
        return data

    def _check(self) -> None:
        got = "sha256:" + self._hash.hexdigest()
        if self._count != self._desc.size or got != self._desc.digest:
            raise InputError(
                f"{self._name}: blob {self._desc.digest} has {self._count} bytes with digest "
                f"{got}, not the {self._desc.size} its manifest declares",
                hint="the archive is corrupt or was modified after the run; run again")

    def close(self) -> None:
        self._raw.close()


def _opener(img: ImageSource, desc: Descriptor) -> Callable[[], BinaryIO]:
    def open_() -> BinaryIO:
        return _Verified(img.open_blob(desc.digest), desc, img.name)  # type: ignore[return-value]
    return open_


def _same_digest(answered: str, want: str, what: str, registry: str) -> None:
    """The registry's Docker-Content-Digest must be the digest of the bytes sent."""
    if answered and answered != want:
        raise CapabilityError(
            f"registry {registry} stored {what} as {answered}, not {want}: it changed the "
            "bytes", hint="push to a registry that stores manifests as sent (OCI "
            "distribution)")


def _target(target: str) -> ImageRef:
    ref = ImageRef.parse(target)
    if ref.digest:
        raise UsageError(f"--to {target!r} carries a digest",
                         hint="give REPOSITORY[:TAG]: the digest pushed is the tested one")
    return ref


def push_tested(tested: TestedImage, target: str, client: RegistryClient | None = None,
                mount_from: tuple[str, ...] = ()) -> PushResult:
    """Push *tested*'s archive to *target* (``registry/repository[:tag]``), byte for byte.
    A blob the target repository lacks is first mounted from the repositories *mount_from*
    (of the same registry), as ``docker push`` does: no bytes sent, none stored twice."""
    ref = _target(target)
    client = client or RegistryClient()
    with OciArchive(tested.archive) as img:
        plan = plan_push(img, tested.digest)
        shown = logs.progress(f"push to {ref.registry}/{ref.repository}",
                              total=sum(b.size for b in plan.blobs))
        with shown:
            others = [r for r in mount_from if r != ref.repository]
            counts = _push_blobs(client, ref, img, plan, shown, mount_from=others)
        for desc, body in plan.manifests:
            answered = client.put_manifest(ref, desc.digest, body, desc.media_type)
            _same_digest(answered, desc.digest, "the manifest", ref.api_host)
        top = plan.top or plan.manifests[-1][0]
        top_body = plan.manifests[-1][1]
        if ref.tag:
            answered = client.put_manifest(ref, ref.tag, top_body, top.media_type)
            _same_digest(answered, top.digest, f"the tag {ref.tag}", ref.api_host)
    _verify(client, ref, tested.digest, top.digest)
    return PushResult(f"{ref.registry}/{ref.repository}", ref.tag, tested.digest, top.digest,
                      counts.uploaded, counts.present, counts.sent,
                      [d.digest for d, _ in plan.manifests], blobs_mounted=counts.mounted)


@dataclass
class _Counts:
    uploaded: int = 0
    present: int = 0
    mounted: int = 0
    sent: int = 0


def _push_blobs(client: RegistryClient, ref: ImageRef, img: ImageSource, plan: PushPlan,
                shown: logs.Progress, *, mount_from: list[str]) -> _Counts:
    """Every blob the repository lacks, mounted from *mount_from* or else uploaded."""
    n = _Counts()
    for blob in plan.blobs:
        shown.step(f"blob {blob.digest[7:19]} ({logs.size(blob.size)})")
        if client.blob_exists(ref, blob.digest):
            n.present += 1
        elif any(client.mount_blob(ref, blob.digest, src) for src in mount_from):
            n.mounted += 1
        else:
            answered = client.upload_blob(ref, blob.digest, blob.size, _opener(img, blob))
            _same_digest(answered, blob.digest, f"blob {blob.digest[:19]}…", ref.api_host)
            n.uploaded += 1
            n.sent += blob.size
        shown.advance(blob.size)
    return n


def _verify(client: RegistryClient, ref: ImageRef, digest: str, top: str) -> None:
    """Read back: the tested digest by digest (bytes hashed), and the tag's digest."""
    got = client.get_manifest(ref.with_digest(digest))
    _same_digest(got.digest, digest, "the tested manifest (read back)", ref.api_host)
    if ref.tag:
        tagged = client.head_manifest(ref)
        if is_digest(tagged.digest):
            _same_digest(tagged.digest, top, f"the tag {ref.tag} (read back)", ref.api_host)
