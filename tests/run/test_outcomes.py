"""result.json put together from typed stage outcomes (no engine: the build record is read
from an OCI archive written here, the other outcomes are made up and labelled so)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab.build import stage as build
from servelab.build.builder import BuilderFacts
from servelab.errors import InputError
from servelab.run.options import STAGES, parse_stages
from servelab.run.outcomes import (
    BuildOutcome,
    HostGpus,
    Inputs,
    LatencyMetrics,
    RepeatResult,
    ScanOutcome,
    SmokeOutcome,
    StageOutcome,
    StartupMetrics,
    TrivyFacts,
    Verdict,
)
from servelab.run.results import assemble, validate_result
from servelab.spec import Arm

SRC = Path(__file__).resolve().parents[2] / "src" / "servelab"
RUN = {"id": "synthetic", "name": None, "started_at": "2026-11-30T00:00:00Z",
       "finished_at": "2026-11-30T00:01:00Z", "machine": "m1"}
EXPERIMENT = {"name": "x", "spec_hash": "sha256:" + "c" * 64, "change": "c", "fixed": ["image"],
              "metrics": ["digest"], "repeats": 1, "spec": {}}
INPUTS = Inputs(build_args={"BASE_IMAGE": "b"}, git_ref=None, commit="abc",
                dockerfile_sha256="d" * 64, context_sha256="e" * 64, model_sha256="f" * 64,
                request_sha256="1" * 64)


def _record(tmp_path: Path) -> build.BuildRecord:
    layout = tmp_path / "layout"
    write_layout(layout, [tar_bytes([E("etc/"), E("etc/hostname", b"x")])])
    path = archive(layout, tmp_path / "image.oci.tar")
    platforms, index, _todo = build.read_archive(path, {})
    return build.BuildRecord(
        arm="treatment", repeat=1, run_id="synthetic", dockerfile="Dockerfile", context=".",
        target=None, requested_platform=None, network="none", build_args={"BASE_IMAGE": "b"},
        source_date_epoch=1_700_000_000, source_date_epoch_from="spec",
        rewrite_timestamp=True, platforms=platforms, index_digest=index, base_images=[
            build.BaseImage(ref="base@sha256:" + "2" * 64, digest="sha256:" + "2" * 64,
                            stage="0", pinned=True)],
        builder=BuilderFacts(None, engine_version="26.1.5"), archive=str(path),
        image_ref="servelab/synthetic/treatment:0123456789abcdef", image_id=None,
        loaded_now=True, wall_s=1.23456, build_s=1.0, load_s=0.1, log="build.log")


def _full(tmp_path: Path) -> RepeatResult:
    """Every stage ran (made-up scan and smoke outcomes, not from a real run)."""
    rec = _record(tmp_path)
    arm = Arm("treatment", tmp_path, tmp_path / "Dockerfile")
    return RepeatResult(
        arm=arm, repeat=1,
        lint=StageOutcome("ok", "0 error", record={"findings": []},
                          verdicts=[Verdict("lint", "lint", True, "0 error")],
                          files={"lint_sarif": "lint.sarif"}),
        build=BuildOutcome("ok", "built", seconds=1.235, record={"manifest_digest": "x"},
                           verdicts=[Verdict("build", "build", True, "built")],
                           files={"build": "build.json"}, build=rec),
        scan=ScanOutcome("ok", "no finding", record={}, files={"trivy_json": "trivy.json"},
                         verdicts=[Verdict("vulnerability gate", "scan", True, "ok")],
                         findings={"CRITICAL": 0, "HIGH": 1, "MEDIUM": 0, "LOW": 0,
                                   "UNKNOWN": 0},
                         trivy=TrivyFacts("0.76.0", "2026-11-30", "/db", None, True)),
        smoke=SmokeOutcome("ok", "pass", record={}, files={"timeline": "timeline.json"},
                           verdicts=[Verdict("smoke", "smoke", True, "pass"),
                                     Verdict("model_sha256", "smoke", None, "not given")],
                           startup=StartupMetrics(0.1, 0.2, 0.3, 0.05, True),
                           latency=LatencyMetrics(1.0, 2.0, 20), model_sha256="9" * 64,
                           host=HostGpus([{"name": "H200"}], "13.0", "ok")))


def _assemble(rr: RepeatResult) -> dict[str, Any]:
    return assemble(rr, run=dict(RUN), experiment=dict(EXPERIMENT), inputs=INPUTS,
                    serve={"port": 8000})


def test_every_stage_lands_in_its_place(tmp_path: Path) -> None:
    rr = _full(tmp_path)
    rec = rr.build.build
    assert rec is not None
    r = _assemble(rr)
    assert validate_result(r) == []
    # the layout of result.json, key order included, is what servelab has always written
    assert list(r) == ["schemaVersion", "servelab", "run", "experiment", "arm", "repeat",
                       "inputs", "image", "environment", "host", "spec", "stages", "metrics",
                       "verdicts", "files"]
    assert list(r["inputs"]) == ["commit", "dockerfile_sha256", "context_sha256",
                                 "model_sha256", "request_sha256", "source_date_epoch",
                                 "build_args", "git_ref"]
    assert list(r["stages"]) == ["lint", "build", "scan", "smoke"]
    assert list(r["metrics"]) == ["digest", "size", "build_seconds", "findings", "startup",
                                  "latency"]
    assert list(r["environment"]) == ["host", "builder", "engine", "trivy"]
    # the build record feeds image, metrics, inputs and environment
    assert r["image"] == {"ref": rec.tested_ref(), "digest": rec.manifest_digest,
                          "config_digest": rec.primary.config_digest,
                          "base": [b.to_dict() for b in rec.base_images]}
    assert r["image"]["ref"].endswith("@" + rec.manifest_digest)
    assert r["metrics"]["digest"] == rec.manifest_digest
    assert r["metrics"]["size"] == {"compressed_bytes": rec.primary.compressed_size,
                                    "uncompressed_bytes": rec.primary.uncompressed_size}
    assert r["metrics"]["build_seconds"] == 1.235
    assert r["inputs"]["source_date_epoch"] == 1_700_000_000
    assert r["environment"]["engine"] == {"version": "26.1.5"}
    assert r["environment"]["builder"]["engine_version"] == "26.1.5"
    # scan and smoke
    assert r["metrics"]["findings"]["HIGH"] == 1
    assert r["environment"]["trivy"]["version"] == "0.76.0"
    assert r["metrics"]["startup"]["ready_s"] == 0.2 and r["metrics"]["startup"]["first_start"]
    assert r["metrics"]["latency"] == {"p50_ms": 1.0, "p95_ms": 2.0, "count": 20}
    assert r["host"] == {"gpus": [{"name": "H200"}], "cuda_driver_version": "13.0",
                         "gpu_state": "ok"}
    # the model the server read wins over the hash of the spec's model path
    assert r["inputs"]["model_sha256"] == "9" * 64
    assert r["inputs"]["commit"] == "abc" and r["inputs"]["build_args"] == {"BASE_IMAGE": "b"}
    # verdicts and files in stage order; seconds and records as the stages gave them
    assert [v["check"] for v in r["verdicts"]] == ["lint", "build", "vulnerability gate",
                                                    "smoke", "model_sha256"]
    assert r["verdicts"][-1]["passed"] is None
    assert list(r["files"]) == ["lint_sarif", "build", "trivy_json", "timeline"]
    assert r["stages"]["build"] == {"status": "ok", "reason": "built", "seconds": 1.235,
                                    "record": {"manifest_digest": "x"}}
    assert r["spec"] == {"serve": {"port": 8000}}


def test_skipped_stages_and_a_prebuilt_image(tmp_path: Path) -> None:
    arm = Arm("control", tmp_path, tmp_path / "Dockerfile", image="img@sha256:" + "3" * 64)
    rr = RepeatResult(arm=arm, repeat=2,
                      build=BuildOutcome("skipped", "prebuilt image: nothing to build"),
                      scan=ScanOutcome("skipped", "not selected with --stages"),
                      smoke=SmokeOutcome("skipped", "not selected with --stages"))
    r = _assemble(rr)
    assert validate_result(r) == []
    assert list(r["stages"]) == ["build", "scan", "smoke"]  # lint not selected: no entry
    assert r["stages"]["scan"] == {"status": "skipped", "reason": "not selected with --stages",
                                   "seconds": None, "record": None}
    assert r["image"] == {"ref": arm.image, "digest": None}
    assert r["metrics"] == {"digest": None}
    assert list(r["environment"]) == ["host"]
    assert r["host"] == {"gpus": [], "cuda_driver_version": None}
    assert r["inputs"]["source_date_epoch"] is None
    assert r["inputs"]["model_sha256"] == "f" * 64
    assert r["verdicts"] == [] and r["files"] == {}
    assert (r["arm"], r["repeat"]) == ("control", 2)


def test_a_failed_build_leaves_nothing_to_test(tmp_path: Path) -> None:
    arm = Arm("treatment", tmp_path, tmp_path / "Dockerfile")
    failed = BuildOutcome("failed", "refusing to build",
                          verdicts=[Verdict("base-pinned", "build", False, "unpinned")])
    rr = RepeatResult(arm=arm, repeat=1, build=failed,
                      scan=ScanOutcome("skipped", "no image"),
                      smoke=SmokeOutcome("skipped", "no image"))
    assert failed.tested_ref is None and rr.image_ref is None
    r = _assemble(rr)
    assert validate_result(r) == []
    assert r["image"]["ref"] is None and r["verdicts"][0]["passed"] is False


def test_parse_stages_keeps_run_order_and_refuses_unknown_names() -> None:
    assert parse_stages("smoke, build") == ("build", "smoke")
    assert parse_stages(",".join(reversed(STAGES))) == STAGES
    for bad in ("build,deploy", " , "):
        with pytest.raises(InputError) as e:
            parse_stages(bad)
        assert e.value.exit_code == 2
        assert "choose from lint, build, scan, smoke" in (e.value.hint or "")


def _servelab_imports(path: Path) -> set[str]:
    """Every servelab module a file imports, at any depth (TYPE_CHECKING and functions too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("servelab"):
            out.add(str(node.module))
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("servelab"))
    return out


def test_the_runner_sits_above_its_stages() -> None:
    """runner imports stages; stages, outcomes, options and results never import the runner
    (not even under TYPE_CHECKING), and the stages read no result dict back."""
    run = SRC / "run"
    assert "servelab.run.stages" in _servelab_imports(run / "runner.py")
    for name in ("stages.py", "outcomes.py", "options.py", "results.py"):
        assert not any(m.startswith("servelab.run.runner")
                       for m in _servelab_imports(run / name)), name
    text = (run / "stages.py").read_text(encoding="utf-8")
    assert 'res["' not in text and "res: dict" not in text
