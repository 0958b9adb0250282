"""The run's disk: refused before building when its peak cannot fit (tested on loop-mounted
filesystems with their real statvfs), a disk that fills mid-run stops the run cleanly, and a
build's BuildKit cache is pruned once its record is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.run import diskplan

pytestmark = pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true",
                                reason="loop mounts need root")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 160 MB ext4 filesystem, loop-mounted for the test."""
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "160M", str(img)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def _spec(tmp_path: Path, dockerfile: str, files: dict[str, int] | None = None) -> Path:
    ctx = tmp_path / "exp" / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    for name, size in (files or {}).items():
        with (ctx / name).open("wb") as f:
            f.truncate(size)  # sparse: counted by the estimate, costs no disk here
    spec = tmp_path / "exp" / "exp.yaml"
    spec.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: disk}\n"
                    "spec:\n  change: disk\n  repeats: 2\n"
                    "  treatment: {context: ctx, dockerfile: Dockerfile}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none}\n")
    return spec


def _run(args: list[str], env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servelab", "run", *args],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, **(env or {})})


def _cache_descriptions() -> str:
    return subprocess.run(["docker", "buildx", "du", "--verbose"], capture_output=True,
                          text=True, check=False).stdout


def test_plan_refuses_a_small_engine_root(small_fs: Path) -> None:
    """The same function the run calls, against a loop-mounted 'engine data root'."""
    free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
    plan = diskplan.estimate([], [], paths={"engine": small_fs}, arms=2, cold=True,
                             keep=False, build=True)
    plan.uncompressed, plan.compressed = 9 * 10**9, 4 * 10**9  # a vLLM image
    need = next(n for n in plan.needs if n.label == "engine")
    assert need.free == free and not need.fits
    # the build phase is the engine's peak: the snapshots and BuildKit's blobs (once)
    assert need.bytes == 9 * 10**9 + 4 * 10**9
    with pytest.raises(diskplan.DiskShort) as e:
        plan.check()
    assert f"on {small_fs} (engine), {diskplan.gib(free)} free" in e.value.message
    assert f"needs ~{diskplan.gib(13e9 + diskplan.FLOOR)}" in e.value.message
    assert e.value.exit_code == 3
    assert "--shard" in (e.value.hint or "") and "--stages" in (e.value.hint or "")
    # a small image fits, and the first build's sizes replace the estimate
    plan.uncompressed, plan.compressed = 10**6, 10**6
    again = diskplan.replan(plan, 2 * 10**6, 10**6)
    assert again.source == "first build" and all(n.bytes < free for n in again.needs)


def test_one_filesystem_sums_its_paths(tmp_path: Path) -> None:
    plan = diskplan.Plan(10**9, 4 * 10**8, "estimate", {"out": tmp_path, "tmp": tmp_path},
                         arms=2, cold=True, keep=False, build=True)
    (need,) = plan.needs
    assert need.label == "out/tmp"
    # the cold pull's phase: TMPDIR's root (U + C) and both archives (2C)
    assert need.bytes == 10**9 + 4 * 10**8 + 2 * 4 * 10**8


def test_one_copy_of_the_image_is_unpacked_at_a_time(tmp_path: Path) -> None:
    """The engine's copy is out while the private node pulls, and back (pulled with the base
    held) once the node's root is gone: never both at once."""
    u, c = 10**9, 4 * 10**8
    plan = diskplan.Plan(u, c, "estimate", {"engine": tmp_path}, arms=1, cold=True, keep=False,
                         build=True, context=3 * 10**8)
    held = {phase: {lbl: sum(b for l2, b, _ in parts if l2 == lbl) for lbl, _, _ in parts}
            for phase, parts in diskplan.phases(plan).items()}
    assert held["cold pull"]["engine"] == 3 * 10**8  # the context's transfer only
    assert held["cold pull"]["tmp"] == u + c
    assert held["warm-base pull"]["engine"] == u + c + 3 * 10**8
    assert "tmp" not in held["warm-base pull"]
    assert held["build"]["engine"] == u + c + 3 * 10**8


@pytest.mark.parametrize(("arms", "repeats", "before", "archives"), [
    (1, 1, 0, 1), (1, 3, 1, 1), (2, 1, 1, 2), (2, 3, 2, 2)])
def test_the_last_build_finds_the_earlier_images(tmp_path: Path, arms: int, repeats: int,
                                                 before: int, archives: int) -> None:
    """Archives and pushed blobs of the distinct images built before the last build (one per
    arm at most): none for the one build of one arm, never more than the arms; on --out, the
    one being written too, unless the build is a repeat that reproduces (it writes nothing).
    """
    u, c = 10**9, 4 * 10**8
    plan = diskplan.Plan(u, c, "estimate", {"out": tmp_path}, arms=arms, cold=True,
                         keep=False, build=True, repeats=repeats)
    build = {lbl: b for lbl, b, _ in diskplan.phases(plan)["build"]}
    assert build["out"] == archives * c
    assert build.get("registry", 0) == before * c


def test_builds_that_do_not_reproduce_count_an_image_per_build(tmp_path: Path) -> None:
    """The vLLM image's three builds gave three digests (timestamp .pyc): each kept its
    archive and pushed blobs, 2C a build that the plan of a reproducing arm does not count."""
    u, c = 10**9, 4 * 10**8
    plan = diskplan.Plan(u, c, "first build", {"out": tmp_path}, arms=1, cold=True,
                         keep=False, build=True, repeats=3)
    assert plan.reproduces and plan.prior == 1
    worse = diskplan.unreproduced(plan, "treatment")
    assert not worse.reproduces and worse.prior == 2 and worse.images == 3
    assert worse.notes[-1].startswith("arm treatment: its builds do not reproduce")
    before = {lbl: b for lbl, b, _ in diskplan.phases(plan)["build"]}
    after = {lbl: b for lbl, b, _ in diskplan.phases(worse)["build"]}
    # a repeat that does not reproduce writes an archive of its own, and keeps it
    assert after["out"] - before["out"] == 2 * c and after["registry"] - before["registry"] == c
    cold = {lbl: b for lbl, b, _ in diskplan.phases(worse)["cold pull"]}
    assert cold["out"] == 3 * c and cold["registry"] == 3 * c
    # the two images on the disk now are counted as held: the next build needs one more
    assert worse.held == {"out": 2 * c, "registry": c}
    (need,) = worse.needs  # --out only here: three archives at the last build, two held
    assert need.label == "out" and need.bytes == 3 * c - 2 * c
    assert plan.needs[0].bytes == c  # the reproducing plan: the arm's one archive
    # idempotent, and the first build's sizes keep the verdict
    assert diskplan.unreproduced(worse, "treatment") is worse
    assert not diskplan.replan(worse, u, c).reproduces


@pytest.mark.docker
def test_run_refuses_before_building_on_a_small_out(tmp_path: Path, small_fs: Path) -> None:
    spec = _spec(tmp_path, "FROM scratch\nCOPY wheels /wheels\n", {"wheels": 2 * 10**9})
    out = small_fs / "out"
    proc = _run([str(spec), "--out", str(out), "--stages", "build"])
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "will not fit" in proc.stderr and f"on {small_fs / 'out'} (out)" in proc.stderr
    assert "free" in proc.stderr and "needs ~" in proc.stderr
    assert not (out / "treatment").exists() and not list((out / "images").glob("*"))


@pytest.mark.docker
def test_the_private_registrys_storage_is_planned_on_tmpdir(tmp_path: Path,
                                                            small_fs: Path) -> None:
    """--cold-start-registry private keeps its storage under TMPDIR: the plan counts the
    pushed blobs there, and a TMPDIR too small for them is refused before any build."""
    spec = _spec(tmp_path, "FROM scratch\nCOPY wheels /wheels\n", {"wheels": 2 * 10**9})
    out = tmp_path / "out"
    proc = _run([str(spec), "--out", str(out), "--stages", "build,smoke",
                 "--cold-start-registry", "private"], env={"TMPDIR": str(small_fs)})
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert f"on {small_fs} (tmp/registry)" in proc.stderr, proc.stderr[-2000:]
    assert not (out / "treatment").exists()
    assert not list(small_fs.glob("servelab-reg-*"))


@pytest.mark.docker
def test_disk_full_mid_run_stops_cleanly(tmp_path: Path, small_fs: Path,
                                         base_image: str) -> None:
    token = uuid.uuid4().hex
    spec = _spec(tmp_path, f"FROM {base_image}\nRUN head -c 300000000 /dev/urandom > /{token}\n")
    out = small_fs / "out"
    proc = _run([str(spec), "--out", str(out), "--stages", "build"],
                env={"SERVELAB_MIN_FREE_BYTES": "0"})
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "disk filled up mid-run" in proc.stderr
    stopped = json.loads((out / "stopped.json").read_text())
    assert stopped["stopped"] is True and "space" in stopped["reason"]
    assert not (out / "images").exists()  # the archives went
    assert token not in _cache_descriptions()  # the build's cache went too
    left = [p for p in small_fs.rglob("*") if p.is_file() and p.name != "stopped.json"
            and "lost+found" not in p.parts]
    assert [p.name for p in left if p.suffix == ".tar"] == []


@pytest.mark.docker
def test_build_cache_is_pruned_once_the_record_is_written(tmp_path: Path,
                                                          base_image: str) -> None:
    token = uuid.uuid4().hex
    spec = _spec(tmp_path, f"FROM {base_image}\nRUN echo {token} > /token\n")
    proc = _run([str(spec), "--out", str(tmp_path / "out"), "--stages", "build",
                 "--repeats", "1"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads((tmp_path / "out" / "treatment" / "repeat-1" / "build.json").read_text())
    assert rec["cache"]["records"] >= 1 and rec["cache"]["left"] == 0
    assert token not in _cache_descriptions()


@pytest.mark.docker
def test_the_runs_context_transfers_go_at_its_end(tmp_path: Path, base_image: str) -> None:
    """BuildKit keeps a context's transfer (the context's size, 4 GB for a vLLM wheelhouse)
    between the run's repeats; once the run's builds are done it goes too."""
    from servelab.build.cache import cache_records

    spec = _spec(tmp_path, f"FROM {base_image}\nCOPY blob /blob\n", {"blob": 3 * 10**6})
    before = cache_records([])
    assert before is not None
    proc = _run([str(spec), "--out", str(tmp_path / "out"), "--stages", "build"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = cache_records([])
    assert after is not None
    new = {i: d for i, d in after.items() if i not in before}
    assert [d for d in new.values() if d.startswith("local source for ")] == []
    # and each repeat's own records went when its record was written
    rec = json.loads((tmp_path / "out" / "treatment" / "repeat-2" / "build.json").read_text())
    assert rec["cache"]["left"] == 0


@pytest.mark.parametrize(("parks", "registry_at_build", "registry_at_pull"), [
    (False, 2, 2), (True, 0, 1)])
def test_the_runs_own_registry_holds_only_the_pulled_images_layers(
        tmp_path: Path, parks: bool, registry_at_build: int, registry_at_pull: int) -> None:
    """Two arms, three repeats: a registry someone else runs keeps both images' blobs from
    their push to the end; the run's own (``private``) parks them between pulls, so the last
    build finds none and each pull finds one image's."""
    u, c = 10**9, 4 * 10**8
    plan = diskplan.Plan(u, c, "estimate", {"out": tmp_path}, arms=2, cold=True, keep=False,
                         build=True, repeats=3, parks=parks)
    phases = {name: {lbl: b for lbl, b, _ in parts}
              for name, parts in diskplan.phases(plan).items()}
    assert phases["build"].get("registry", 0) == registry_at_build * c
    assert phases["cold pull"]["registry"] == registry_at_pull * c
    assert phases["warm-base pull"]["registry"] == registry_at_pull * c
    assert phases["cold pull"]["out"] == 2 * c  # the archives are the same either way
    # carried through the first build's plan and an arm that stops reproducing
    again = diskplan.replan(plan, u, c)
    assert again.parks is parks
    worse = diskplan.unreproduced(again, "treatment")
    assert worse.held["registry"] == (0 if parks else c)


def test_the_context_is_counted_once_however_many_arms_build_from_it(tmp_path: Path) -> None:
    """Each build's context transfer is pruned after it: two arms hold one at a time."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "wheel.whl").write_bytes(b"x" * 10**6)
    one, two = (diskplan.estimate([], [ctx], paths={"out": tmp_path}, arms=n, cold=False,
                                  keep=False, build=True) for n in (1, 2))
    assert one.context == two.context == 10**6
