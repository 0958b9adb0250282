"""Builder capability logic: parsers on captured real output, and what ensure_builder decides
and runs. The docker-container fallback cannot run here (moby/buildkit cannot be pulled), so
its commands are recorded by a runner that answers as an engine would, and the probe result
is given per builder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from servelab.build import builder
from servelab.errors import CapabilityError, CommandError
from servelab.proc import Completed

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "build" / "captured"


def test_parsers_on_captured_output() -> None:
    assert builder.parse_buildx_version((CAPTURED / "buildx-version.txt").read_text()) \
        == "0.13.1+ds1"
    assert builder.parse_buildx_version(
        "github.com/docker/buildx v0.11.2 9872040b6626fb7d87ef7296fd5b832e8cc2ad17") == "v0.11.2"
    info = builder.parse_inspect((CAPTURED / "buildx-inspect-docker-driver.txt").read_text())
    assert info == {"Name": "default", "Driver": "docker", "BuildKit version": "v0.0.0+unknown"}
    docs = builder.parse_inspect(
        (CAPTURED / "buildx-inspect-docker-container-docs.txt").read_text())
    assert docs == {"Name": "elated_tesla", "Driver": "docker-container",
                    "BuildKit version": "v0.10.3"}
    assert builder.parse_engine_version((CAPTURED / "docker-version.json").read_text()) \
        == "26.1.5+dfsg1"
    assert builder.parse_engine_version("not json") == "unknown"
    assert builder.parse_containerd_store(
        (CAPTURED / "docker-info-driverstatus.json").read_text()) is True
    assert builder.parse_containerd_store('[["Backing Filesystem","extfs"]]') is False
    assert builder.parse_containerd_store("") is None


def test_commands() -> None:
    name = builder.fallback_name("20261130T101212-ABCD/x")
    assert name == "servelab-20261130t101212-abcd-x"
    image = builder.buildkit_image()
    assert image.startswith("moby/buildkit:v0.13") and "@sha256:" in image
    assert builder.create_command(name, image) == [
        "docker", "buildx", "create", "--name", name, "--driver", "docker-container",
        "--driver-opt", f"image={image}"]
    assert builder.bootstrap_command(name) == ["docker", "buildx", "inspect", "--bootstrap", name]
    assert builder.remove_command(name) == ["docker", "buildx", "rm", name]
    probe = builder.probe_command(name, Path("/ctx"), Path("/o.tar"))
    assert probe[:5] == ["docker", "buildx", "build", "--builder", name]
    # exactly a build's export: no rewrite-timestamp (servelab clamps the times itself)
    assert "type=oci,dest=/o.tar,compression=zstd" in probe
    assert not any("rewrite-timestamp" in a for a in probe)
    assert "--no-cache" in probe and "--provenance=false" in probe


def test_unpinned_buildkit_override_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVELAB_BUILDKIT_IMAGE", "moby/buildkit:latest")
    with pytest.raises(CapabilityError, match="not pinned by digest") as e:
        builder.buildkit_image()
    assert e.value.exit_code == 3
    pinned = "mirror.example/buildkit:v0.16.0@sha256:" + "b" * 64
    monkeypatch.setenv("SERVELAB_BUILDKIT_IMAGE", pinned)
    assert builder.buildkit_image() == pinned


class Engine:
    """Answers docker commands as an engine would and records them."""

    def __init__(self, fail: Sequence[str] = ()) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, command: Sequence[str], *, timeout: float | None = None,
                 check: bool = True, env: Any = None, cwd: Any = None) -> Completed:
        argv = list(command)
        self.calls.append(argv)
        words = " ".join(argv)
        if any(f in words for f in self.fail):
            if check:
                raise CommandError(argv, returncode=1, stderr="ERROR: cannot pull image")
            return Completed(tuple(argv), 1, "", "ERROR: failed", 0.1)
        out = ""
        if argv[1:3] == ["buildx", "inspect"] and argv[-1].startswith("servelab-"):
            out = "Name: x\nDriver: docker-container\nBuildKit version: v0.13.2\n"
        elif argv[1:3] == ["buildx", "version"]:
            out = "github.com/docker/buildx v0.13.1 abc\n"
        return Completed(tuple(argv), 0, out, "", 0.1)

    def kinds(self) -> list[str]:
        return [" ".join(c[1:3]) for c in self.calls
                if (c[1] == "buildx" and c[2] in ("create", "rm"))
                or c[1:4] == ["buildx", "inspect", "--bootstrap"]]


CLASSIC = (CAPTURED / "classic-store-oci-error.txt").read_text().strip().splitlines()[-2]


def _probe(results: dict[str | None, bool]) -> Any:
    seen: list[str | None] = []

    def probe(name: str | None) -> builder.ProbeResult:
        seen.append(name)
        return builder.ProbeResult(results[None if name is None else "fallback"], CLASSIC)

    probe.seen = seen  # type: ignore[attr-defined]
    return probe


def test_capable_current_builder_creates_nothing() -> None:
    eng = Engine()
    with builder.ensure_builder("r1", run=eng, try_builder=_probe({None: True})) as facts:
        assert facts.name is None and facts.builder_args() == []
        assert not facts.created_by_servelab
    assert eng.kinds() == []


def test_incapable_current_builder_gets_a_pinned_fallback_removed_after() -> None:
    eng = Engine()
    probe = _probe({None: False, "fallback": True})
    with builder.ensure_builder("r2", run=eng, try_builder=probe) as facts:
        assert facts.created_by_servelab and facts.name == "servelab-r2"
        assert facts.builder_args() == ["--builder", "servelab-r2"]
        assert facts.buildkit_image == builder.BUILDKIT_IMAGE
        assert facts.driver == "docker-container" and facts.buildkit_version == "v0.13.2"
        assert "OCI exporter is not supported" in (facts.fallback_reason or "")
        assert eng.kinds() == ["buildx create", "buildx inspect"]
    assert probe.seen == [None, "servelab-r2"]
    assert eng.kinds() == ["buildx create", "buildx inspect", "buildx rm"]
    assert eng.calls[-1] == ["docker", "buildx", "rm", "servelab-r2"]


def test_fallback_is_kept_with_keep() -> None:
    eng = Engine()
    with builder.ensure_builder("r3", keep=True, run=eng,
                                try_builder=_probe({None: False, "fallback": True})):
        pass
    assert "buildx rm" not in eng.kinds()


def test_neither_works_is_exit_3_with_how_to_and_cleanup() -> None:
    eng = Engine()
    with pytest.raises(CapabilityError) as e, builder.ensure_builder(
            "r4", run=eng, try_builder=_probe({None: False, "fallback": False})):
        pass
    assert e.value.exit_code == 3
    assert "containerd image store" in (e.value.hint or "")
    assert eng.kinds()[-1] == "buildx rm"


def test_fallback_that_cannot_start_is_exit_3() -> None:
    eng = Engine(fail=["buildx inspect --bootstrap"])
    with pytest.raises(CapabilityError, match="could not start a docker-container builder"), \
            builder.ensure_builder("r5", run=eng,
                                   try_builder=_probe({None: False, "fallback": True})):
        pass
    assert eng.kinds()[-1] == "buildx rm"


def test_no_fallback_allowed() -> None:
    eng = Engine()
    with pytest.raises(CapabilityError, match="cannot export OCI"), builder.ensure_builder(
            "r6", allow_fallback=False, run=eng, try_builder=_probe({None: False})):
        pass
    assert eng.kinds() == []


def test_probe_reads_a_failed_build_as_not_capable() -> None:
    eng = Engine(fail=["buildx build"])
    got = builder.probe("servelab-x", run=eng)
    assert not got.ok and "failed" in got.detail
    assert eng.calls[0][:5] == ["docker", "buildx", "build", "--builder", "servelab-x"]


@pytest.mark.parametrize(("created", "ok"), [
    (builder.PROBE_CREATED, True), ("2026-12-04T16:00:00Z", False), (None, False)])
def test_probe_asks_the_config_for_source_date_epoch(
        tmp_path: Path, created: str | None, ok: bool) -> None:
    """What the probe reads back: the archive's config ``created``, not a layer's file time
    (servelab clamps those itself), so a BuildKit without rewrite-timestamp (v0.11, v0.12)
    is capable and one that ignores SOURCE_DATE_EPOCH is not."""
    from test_export import _tar_layer, write_buildkit_archive

    made = tmp_path / "made.oci.tar"
    write_buildkit_archive(made, [("zstd", _tar_layer({"probe.txt": b"servelab probe\n"}))],
                           created=created)

    class Writes(Engine):
        def __call__(self, command: Sequence[str], **kw: Any) -> Completed:
            argv = list(command)
            if argv[1:3] == ["buildx", "build"]:
                out = argv[argv.index("--output") + 1]
                dest = Path(dict(p.split("=", 1) for p in out.split(","))["dest"])
                dest.write_bytes(made.read_bytes())
            return super().__call__(command, **kw)

    got = builder.probe(None, run=Writes())
    assert got.ok is ok
    if not ok:
        assert f"config created {created}" in got.detail and "v0.11" in got.detail


def test_sweep_removes_only_servelab_builders() -> None:
    class Ls(Engine):
        def __call__(self, command: Sequence[str], **kw: Any) -> Completed:
            if list(command[1:3]) == ["buildx", "ls"]:
                self.calls.append(list(command))
                return Completed(tuple(command), 0, "default\ndefault\nservelab-old\nmine\n",
                                 "", 0.1)
            return super().__call__(command, **kw)

    eng = Ls()
    assert builder.sweep(run=eng) == ["servelab-old"]
    assert eng.calls[-1] == ["docker", "buildx", "rm", "servelab-old"]
