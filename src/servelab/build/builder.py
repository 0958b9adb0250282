"""A builder that can export OCI as servelab's builds do, found by trying.

API::

    with ensure_builder(run_id, work_dir) as facts:     # -> BuilderFacts
        argv = ["docker", "buildx", "build", *facts.builder_args(), ...]

``ensure_builder`` builds a two-line probe (``FROM scratch`` + ``COPY``) with the current
builder, exporting OCI exactly as a build does (``type=oci``, ``compression=zstd``:
:func:`servelab.build.export.output_option`) with a fixed ``SOURCE_DATE_EPOCH``, and reads the
archive back: the builder is capable only if the image config's ``created`` is that epoch
(BuildKit v0.11 and later; an older one ignores the variable, and its configs would differ
from build to build). The layers' file times are not asked of BuildKit: servelab clamps them
itself (:mod:`servelab.build.clamp`), so no ``rewrite-timestamp`` (v0.13) is needed. When it
is not capable
(e.g. the ``docker`` driver with the classic image store), a ``docker-container`` builder named
``servelab-<run id>`` is created from the digest-pinned ``moby/buildkit`` image
(:data:`BUILDKIT_IMAGE`, or ``SERVELAB_BUILDKIT_IMAGE``, which must be pinned by digest too),
bootstrapped and probed the same way; it is removed when the block ends unless ``keep``.
Neither working is a :class:`~servelab.errors.CapabilityError` (exit 3) saying how to get a
capable builder. The daemon's configuration is never touched.

Builders cannot carry labels: leftovers of killed runs are found by their ``servelab-`` name
(:func:`sweep`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from servelab import proc
from servelab.build.export import output_option
from servelab.errors import CapabilityError, CommandError, ServelabError
from servelab.image.ref import pinned_digest
from servelab.textio import write_file

#: BuildKit v0.13.2, pinned by its multi-arch index digest (v0.11 would do: see the module
#: docstring; the pin is kept, as changing it changes the fallback's digests).
BUILDKIT_IMAGE = (
    "moby/buildkit:v0.13.2"
    "@sha256:9194b5ec1be368f41c516df7f93f7f540630ea06136056b2ffebb62226ed4ad6"
)
PROBE_EPOCH = 1_000_000_000
PREFIX = "servelab-"


class Runner(Protocol):
    def __call__(self, command: Sequence[str], *, timeout: float | None = ...,
                 check: bool = ..., env: dict[str, str] | None = ...,
                 cwd: str | Path | None = ...) -> proc.Completed: ...


@dataclass
class ProbeResult:
    ok: bool
    detail: str = ""


@dataclass
class BuilderFacts:
    """Which builder builds, what it runs on, and whether servelab created it."""

    #: what --builder gets (None: the current builder, not named on the command line)
    name: str | None
    #: the builder's name as buildx reports it
    instance: str = "unknown"
    driver: str = "unknown"
    engine_version: str = "unknown"
    buildx_version: str = "unknown"
    buildkit_version: str = "unknown"
    containerd_store: bool | None = None
    created_by_servelab: bool = False
    buildkit_image: str | None = None
    #: why the current builder was not used, when a fallback was created
    fallback_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def builder_args(self) -> list[str]:
        return ["--builder", self.name] if self.name else []

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, notes=list(self.notes))


# ---------------------------------------------------------------------------- parsing


def parse_buildx_version(text: str) -> str:
    """``github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3`` -> ``0.13.1+ds1``."""
    parts = text.split()
    return parts[1] if len(parts) >= 2 else (parts[0] if parts else "unknown")


def parse_inspect(text: str) -> dict[str, str]:
    """Name, Driver and the first node's BuildKit version from ``docker buildx inspect``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if key in ("BuildKit", "Buildkit"):
            key = "BuildKit version"
        if sep and key in ("Name", "Driver", "BuildKit version") and key not in out:
            out[key] = value.strip()
    return out


def parse_engine_version(text: str) -> str:
    """The server version from ``docker version --format '{{json .}}'``."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "unknown"
    server = doc.get("Server") if isinstance(doc, dict) else None
    return str(server.get("Version", "unknown")) if isinstance(server, dict) else "unknown"


def parse_containerd_store(text: str) -> bool | None:
    """Whether ``docker info --format '{{json .DriverStatus}}'`` shows the containerd store."""
    try:
        rows = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rows, list):
        return None
    return any(isinstance(r, list) and len(r) == 2 and r[0] == "driver-type"
               and "containerd" in str(r[1]) for r in rows)


# ---------------------------------------------------------------------------- commands


def buildkit_image() -> str:
    """The pinned image for a fallback builder (SERVELAB_BUILDKIT_IMAGE overrides it)."""
    image = os.environ.get("SERVELAB_BUILDKIT_IMAGE", BUILDKIT_IMAGE)
    if not pinned_digest(image):
        raise CapabilityError(
            f"SERVELAB_BUILDKIT_IMAGE={image!r} is not pinned by digest",
            hint="use name:tag@sha256:<digest> (servelab pin resolves one)",
        )
    return image


def fallback_name(run_id: str) -> str:
    return PREFIX + re.sub(r"[^a-z0-9_-]", "-", run_id.lower())[:40]


def create_command(name: str, image: str) -> list[str]:
    return ["docker", "buildx", "create", "--name", name, "--driver", "docker-container",
            "--driver-opt", f"image={image}"]


def bootstrap_command(name: str) -> list[str]:
    return ["docker", "buildx", "inspect", "--bootstrap", name]


def remove_command(name: str) -> list[str]:
    return ["docker", "buildx", "rm", name]


def probe_command(builder: str | None, context: Path, dest: Path) -> list[str]:
    argv = ["docker", "buildx", "build"]
    if builder:
        argv += ["--builder", builder]
    return [*argv, "--no-cache", "--provenance=false", "--sbom=false", "--progress=plain",
            "--output", output_option(dest, rewrite_timestamp=False), str(context)]


# ---------------------------------------------------------------------------- probing


def _write_probe_context(d: Path) -> Path:
    ctx = d / "context"
    ctx.mkdir()
    write_file(ctx / "Dockerfile", "FROM scratch\nCOPY probe.txt /probe.txt\n")
    write_file(ctx / "probe.txt", "servelab probe\n")
    return ctx


def probe_mtime(archive: Path, name: str = "probe.txt") -> int | None:
    """The mtime of file *name* in an OCI archive's layers (None when it is not there)."""
    from servelab.image.oci import OciArchive, layer_stream

    with OciArchive(archive) as img:
        pm = img.platform_manifests()[0]
        for layer in pm.layers:
            with img.open_blob(layer.digest) as raw, layer_stream(raw) as data, \
                    tarfile.open(fileobj=data, mode="r|") as tf:
                for m in tf:
                    if m.name.removeprefix("./").lstrip("/") == name:
                        return int(m.mtime)
    return None


def probe_created(archive: Path) -> str | None:
    """The ``created`` of an OCI archive's (first) image config; None when it has none."""
    from servelab.image.oci import OciArchive

    with OciArchive(archive) as img:
        created = img.read_config(img.platform_manifests()[0].config).get("created")
    return created if isinstance(created, str) else None


#: PROBE_EPOCH as BuildKit writes it in a config's ``created``
PROBE_CREATED = "2001-09-09T01:46:40Z"


#: the probe's one step as BuildKit describes its cache record
PROBE_STEP = "[1/1] COPY probe.txt /probe.txt"


def probe(builder: str | None, run: Runner = proc.run) -> ProbeResult:
    """Whether *builder* (None: the current one) exports OCI as builds do, honouring
    SOURCE_DATE_EPOCH. The
    probe's own cache record and its context's transfers go afterwards, as a build's do
    (:mod:`servelab.build.cache`)."""
    from servelab.build import cache

    args = ["--builder", builder] if builder else []
    before = cache.cache_ids(args) if run is proc.run else None
    tmp = Path(tempfile.mkdtemp(prefix="servelab-probe-"))
    try:
        ctx = _write_probe_context(tmp)
        dest = tmp / "probe.oci.tar"
        res = run(probe_command(builder, ctx, dest), timeout=300, check=False,
                  env={"SOURCE_DATE_EPOCH": str(PROBE_EPOCH)})
        if res.returncode != 0:
            return ProbeResult(False, proc.tail(res.stderr, 3, inline=True) or "no output")
        try:
            created = probe_created(dest)
        except ServelabError as e:
            return ProbeResult(False, f"the OCI archive could not be read: {e.message}")
        if created != PROBE_CREATED:
            return ProbeResult(False, f"SOURCE_DATE_EPOCH was ignored (config created "
                               f"{created}, expected {PROBE_CREATED}): BuildKit older than "
                               "v0.11")
        return ProbeResult(True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if before is not None:  # and its context's transfers (new ones on a fresh builder)
            cache.prune_new(before, args, [PROBE_STEP])
            cache.prune_transfers(before, args)


_FACTS: dict[str | None, BuilderFacts] = {}


def gather_facts(builder: str | None, run: Runner = proc.run) -> BuilderFacts:
    """Engine, buildx and BuildKit versions and the driver (cached per process)."""
    cache = run is proc.run  # facts from another runner (tests) are not the engine's
    if cache and builder in _FACTS:
        return BuilderFacts(**_FACTS[builder].to_dict())
    facts = BuilderFacts(name=builder)

    def out(argv: list[str]) -> str:
        try:
            res = run(argv, timeout=60, check=False)
        except ServelabError:
            return ""
        return res.stdout if res.returncode == 0 else ""

    facts.engine_version = parse_engine_version(out(["docker", "version", "--format",
                                                     "{{json .}}"]))
    facts.buildx_version = parse_buildx_version(out(["docker", "buildx", "version"]))
    info = parse_inspect(out(["docker", "buildx", "inspect", *([builder] if builder else [])]))
    facts.instance = info.get("Name", "unknown")
    facts.driver = info.get("Driver", "unknown")
    facts.buildkit_version = info.get("BuildKit version", "unknown")
    facts.containerd_store = parse_containerd_store(
        out(["docker", "info", "--format", "{{json .DriverStatus}}"]))
    if cache:
        _FACTS[builder] = BuilderFacts(**facts.to_dict())
    return facts


# ---------------------------------------------------------------------------- the decision

HOW_TO = (
    "use a builder that exports OCI and honours SOURCE_DATE_EPOCH: turn on the containerd "
    "image store in the engine (daemon.json {\"features\": {\"containerd-snapshotter\": "
    "true}}), or create a docker-container builder from moby/buildkit v0.11 or later (e.g. "
    "docker/setup-buildx-action) and select it with BUILDX_BUILDER; on a machine that cannot "
    "pull moby/buildkit, set SERVELAB_BUILDKIT_IMAGE to a pinned copy in a reachable registry"
)

_CAPABLE: dict[str | None, ProbeResult] = {}


def _cached_probe(builder: str | None, run: Runner) -> ProbeResult:
    if run is not proc.run:
        return probe(builder, run)
    if builder not in _CAPABLE:
        _CAPABLE[builder] = probe(builder, run)
    return _CAPABLE[builder]


@contextlib.contextmanager
def ensure_builder(
    run_id: str,
    *,
    allow_fallback: bool = True,
    keep: bool = False,
    run: Runner = proc.run,
    try_builder: Callable[[str | None], ProbeResult] | None = None,
) -> Iterator[BuilderFacts]:
    """A capable builder for the block (see the module docstring). *try_builder* replaces the
    probe (tests of the decision); *run* runs every docker command."""
    check = try_builder or (lambda b: _cached_probe(b, run))
    current = check(None)
    if current.ok:
        yield gather_facts(None, run)
        return
    if not allow_fallback:
        raise CapabilityError(
            f"the current builder cannot export OCI with rewritten timestamps: {current.detail}",
            hint=HOW_TO)
    name = fallback_name(run_id)
    image = buildkit_image()
    try:
        _create_fallback(name, image, run)
        got = check(name)
        if not got.ok:
            raise CapabilityError(
                "neither the current builder nor a docker-container builder could export OCI "
                f"with rewritten timestamps (current: {current.detail}; {name}: {got.detail})",
                hint=HOW_TO)
        facts = gather_facts(name, run)
        facts.created_by_servelab = True
        facts.buildkit_image = image
        facts.fallback_reason = current.detail
        yield facts
    finally:
        if not keep:
            run(remove_command(name), timeout=120, check=False)
            _CAPABLE.pop(name, None)
            _FACTS.pop(name, None)


def _create_fallback(name: str, image: str, run: Runner) -> None:
    for argv in (create_command(name, image), bootstrap_command(name)):
        try:
            run(argv, timeout=600, check=True)
        except CommandError as e:
            raise CapabilityError(
                f"could not start a docker-container builder from {image}: "
                f"{proc.tail(e.stderr, 3, inline=True) or 'no output'}", hint=HOW_TO) from e


def sweep(run: Runner = proc.run) -> list[str]:
    """Remove builders left by killed servelab runs (named ``servelab-*``); their names."""
    res = run(["docker", "buildx", "ls", "--format", "{{.Name}}"], timeout=60, check=False)
    gone: list[str] = []
    for name in dict.fromkeys(res.stdout.split()):
        if name.startswith(PREFIX):
            run(remove_command(name), timeout=120, check=False)
            gone.append(name)
    return gone
