"""The build stage's decisions that need no engine: command line, pinned bases, epoch, disk,
names, the size cache, and the verdict over archives written here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab.build import stage as build
from servelab.build.builder import BuilderFacts
from servelab.errors import CapabilityError, InputError
from servelab.spec import Arm, BuildSettings

DATA = Path(__file__).resolve().parent.parent / "data" / "build"
PINNED = "127.0.0.1:5000/servelab/python-base:bookworm@sha256:" + "0" * 64


def _arm(dockerfile: Path, **kw: object) -> Arm:
    return Arm("treatment", dockerfile.parent, dockerfile, **kw)  # type: ignore[arg-type]


def test_build_command_has_every_reproducibility_option(tmp_path: Path) -> None:
    arm = _arm(DATA / "nondeterministic" / "Dockerfile",
               build_args={"BASE_IMAGE": PINNED, "A": "1"}, target="final")
    settings = BuildSettings(network="none", platform="linux/amd64")
    argv = build.build_command(arm, settings, dest=tmp_path / "o.tar",
                               builder_args=["--builder", "b"], metadata=tmp_path / "m.json")
    assert argv[:5] == ["docker", "buildx", "build", "--builder", "b"]
    for flag in ("--no-cache", "--provenance=false", "--sbom=false"):
        assert flag in argv
    assert argv[argv.index("--output") + 1] == \
        f"type=oci,dest={tmp_path / 'o.tar'},compression=zstd,rewrite-timestamp=true"
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("--platform") + 1] == "linux/amd64"
    assert argv[argv.index("--target") + 1] == "final"
    args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    assert args == ["A=1", f"BASE_IMAGE={PINNED}"]
    assert argv[-1] == str(arm.context)
    default = build.build_command(arm, BuildSettings(), dest=tmp_path / "o.tar",
                                  builder_args=[], metadata=tmp_path / "m.json",
                                  rewrite_timestamp=False)
    assert "--network" not in default and "--platform" not in default
    assert default[default.index("--output") + 1] == \
        f"type=oci,dest={tmp_path / 'o.tar'},compression=zstd"


def test_unpinned_base_is_refused_with_the_lint_rule() -> None:
    arm = _arm(DATA / "unpinned" / "Dockerfile")
    bases = build.base_images(arm)
    assert [(b.ref, b.pinned) for b in bases] == [
        ("127.0.0.1:5000/servelab/python-base:bookworm", False)]
    with pytest.raises(build.BaseUnpinned) as e:
        build.check_pinned(arm, bases)
    assert e.value.exit_code == 1
    assert "[base-unpinned]" in e.value.message and "moving pointer" in e.value.message
    assert "servelab pin" in (e.value.hint or "")
    allowed = _arm(DATA / "unpinned" / "Dockerfile", allow_unpinned_base=True)
    notes = build.check_pinned(allowed, bases)
    assert notes and "allowed for arm treatment" in notes[0]


def test_arg_bases_resolve_with_build_args() -> None:
    df = DATA / "nondeterministic" / "Dockerfile"
    pinned = build.base_images(_arm(df, build_args={"BASE_IMAGE": PINNED}))
    assert [(b.ref, b.digest) for b in pinned] == [(PINNED, "sha256:" + "0" * 64)]
    assert build.check_pinned(_arm(df, build_args={"BASE_IMAGE": PINNED}), pinned) == []
    unknown = build.base_images(_arm(df))
    assert not unknown[0].pinned
    with pytest.raises(build.BaseUnpinned):
        build.check_pinned(_arm(df), unknown)


def test_source_date_epoch_from_spec_and_from_git(tmp_path: Path) -> None:
    arm = _arm(tmp_path / "ctx" / "Dockerfile")
    assert build.source_date_epoch(arm, BuildSettings(source_date_epoch=42)) == (42, "spec")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(InputError, match="no commit time") as e:
        build.source_date_epoch(arm, BuildSettings())
    assert "sourceDateEpoch" in (e.value.hint or "")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_DATE": "@1600000000 +0000", "GIT_AUTHOR_DATE": "@1500000000 +0000",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "x"]):
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True)
    assert build.source_date_epoch(arm, BuildSettings()) == (1600000000, "commit")


def test_disk_check_is_exit_3(tmp_path: Path) -> None:
    build.check_disk([tmp_path], 1)
    with pytest.raises(CapabilityError, match="not enough free disk") as e:
        build.check_disk([tmp_path / "not" / "there"], 1 << 62)
    assert e.value.exit_code == 3


def test_image_name_is_a_valid_reference() -> None:
    name = build.image_name("20261130T101212-AbCd", "Treatment_1", "sha256:" + "ab" * 32)
    assert name == "servelab/20261130t101212-abcd/treatment-1:abababababababab"
    from servelab.image.ref import ImageRef

    assert ImageRef.parse(name).tag == "abababababababab"


def test_size_cache_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "c"))
    assert build.load_sizes() == {}
    build.save_sizes({"sha256:a": 10, "sha256:b": None})
    build.save_sizes({"sha256:c": 30})
    assert build.load_sizes() == {"sha256:a": 10, "sha256:c": 30}
    (tmp_path / "c" / build.SIZES_FILE).write_text("{broken")
    assert build.load_sizes() == {}


# ---------------------------------------------------------------------------- verdict


def _record(path: Path, repeat: int) -> build.BuildRecord:
    platforms, index, _todo = build.read_archive(path, {})
    return build.BuildRecord(
        arm="treatment", repeat=repeat, run_id="r", dockerfile="Dockerfile", context=".",
        target=None, requested_platform=None, network="default", build_args={},
        source_date_epoch=1, source_date_epoch_from="spec", rewrite_timestamp=True,
        platforms=platforms, index_digest=index, base_images=[], builder=BuilderFacts(None),
        archive=str(path), image_ref=None, image_id=None, loaded_now=False, wall_s=1.0,
        build_s=0.5, load_s=0.2, log="build.log")


def test_verdict(tmp_path: Path) -> None:
    base = tar_bytes([E("etc/"), E("etc/hostname", b"x")])
    archives = []
    for i, content in enumerate([b"1", b"1", b"2"]):
        layout = tmp_path / f"l{i}"
        write_layout(layout, [base, tar_bytes([E("build-date", content)])])
        archives.append(archive(layout, tmp_path / f"a{i}.tar"))
    r1, r2, r3 = (_record(a, n) for n, a in enumerate(archives, 1))
    assert build.verdict([r1]).reproducible is None
    same = build.verdict([r1, r2])
    assert same.reproducible is True and len(same.distinct) == 1
    differ = build.verdict([r1, r2, r3])
    assert differ.reproducible is False and differ.pair == (1, 3)
    assert "/build-date" in differ.explanation[0] and "content differs" in differ.explanation[0]
    doc = differ.to_dict()
    json.dumps(doc)
    assert doc["verdict"] == "differs" and doc["summary"].startswith("not reproducible")
    assert r1.to_dict()["compressed_size"] == (
        r1.primary.manifest_size + r1.primary.config_size + sum(x.size for x in r1.primary.layers))
    assert r1.overhead_s == pytest.approx(0.3)
