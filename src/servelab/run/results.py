"""result.json of one repeat of one arm: assemble it from the typed outcomes, validate it,
write it, read it back."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab import __version__
from servelab.errors import InputError
from servelab.textio import write_text_atomic

if TYPE_CHECKING:
    from servelab.build.stage import BuildRecord
    from servelab.run.outcomes import Inputs, RepeatResult, ScanOutcome, SmokeOutcome

RESULT_FILE = "result.json"
SUMMARY_FILE = "summary.json"


def host_facts() -> dict[str, Any]:
    return {"os": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "node": platform.node()}


def assemble(rr: RepeatResult, *, run: dict[str, Any], experiment: dict[str, Any],
             inputs: Inputs, serve: dict[str, Any]) -> dict[str, Any]:
    """result.json of one repeat of one arm, put together from its typed stage outcomes: the
    one place that knows the file's layout (validate it with :func:`validate_result`)."""
    rec = rr.build.build
    stages = rr.stages()
    return {
        "schemaVersion": 1,
        "servelab": {"version": __version__},
        "run": run,
        "experiment": experiment,
        "arm": rr.arm.name,
        "repeat": rr.repeat,
        "inputs": _inputs(inputs, rec, rr.smoke),
        "image": _image(rr.image_ref, rec),
        "environment": _environment(rec, rr.scan),
        "host": (rr.smoke.host.to_dict() if rr.smoke.host is not None
                 else {"gpus": [], "cuda_driver_version": None}),
        "spec": {"serve": serve},
        "stages": {name: o.to_dict() for name, o in stages},
        "metrics": _metrics(rec, rr.scan, rr.smoke),
        "verdicts": [v.to_dict() for _, o in stages for v in o.verdicts],
        "files": {k: v for _, o in stages for k, v in o.files.items()},
    }


def _inputs(i: Inputs, rec: BuildRecord | None, smoke: SmokeOutcome) -> dict[str, Any]:
    return {"commit": i.commit, "dockerfile_sha256": i.dockerfile_sha256,
            "context_sha256": i.context_sha256,
            # the sha256 of the model the server really read, when the smoke stage measured it
            "model_sha256": smoke.model_sha256 if smoke.model_sha256 is not None
            else i.model_sha256,
            "request_sha256": i.request_sha256,
            "source_date_epoch": rec.source_date_epoch if rec is not None else None,
            "build_args": dict(i.build_args), "git_ref": i.git_ref}


def _image(ref: str | None, rec: BuildRecord | None) -> dict[str, Any]:
    if rec is None:
        return {"ref": ref, "digest": None}
    return {"ref": ref, "digest": rec.manifest_digest, "config_digest": rec.primary.config_digest,
            "base": [b.to_dict() for b in rec.base_images]}


def _environment(rec: BuildRecord | None, scan: ScanOutcome) -> dict[str, Any]:
    env: dict[str, Any] = {"host": host_facts()}
    if rec is not None:
        env["builder"] = rec.builder.to_dict()
        env["engine"] = {"version": rec.builder.engine_version}
    if scan.trivy is not None:
        env["trivy"] = scan.trivy.to_dict()
    return env


def _metrics(rec: BuildRecord | None, scan: ScanOutcome,
             smoke: SmokeOutcome) -> dict[str, Any]:
    m: dict[str, Any] = {"digest": rec.manifest_digest if rec is not None else None}
    if rec is not None:
        m["size"] = {"compressed_bytes": rec.primary.compressed_size,
                     "uncompressed_bytes": rec.primary.uncompressed_size}
        m["build_seconds"] = round(rec.wall_s, 3)
    if scan.findings is not None:
        m["findings"] = dict(scan.findings)
    if smoke.startup is not None:
        m["startup"] = smoke.startup.to_dict()
    if smoke.latency is not None:
        m["latency"] = smoke.latency.to_dict()
    if smoke.node is not None:
        m["coldstart"] = smoke.node.to_dict()
    if smoke.model_load is not None:
        m["model_load"] = smoke.model_load.to_dict()
    if smoke.gpu_phases is not None:
        m["gpu"] = smoke.gpu_phases.to_dict()
    return m


def validate_result(data: dict[str, Any]) -> list[str]:
    from servelab.spec import MAX_DOCUMENT_NUMBER, out_of_range, schema_errors

    problems = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
                for e in schema_errors("result", data)]
    big = out_of_range(data)
    if big is not None:
        problems.append(f"a number out of range: {big.lstrip('/')} (at most "
                        f"{MAX_DOCUMENT_NUMBER:g} in magnitude)")
    return problems


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _load_json(path: Path) -> Any:
    from servelab.textio import read_json

    return read_json(path, what="result or summary file",
                     hint="give a result.json or summary.json written by servelab")


def load_results(path: Path) -> list[dict[str, Any]]:
    """The result dicts in a result.json, a summary.json, or a directory of artifacts; a
    result listed twice (the same run, arm and repeat) once (:func:`load_results_noted`)."""
    return load_results_noted(path)[0]


def load_results_noted(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`load_results`, and a note for each result left out because it was listed
    twice: a summary.json whose ``results`` hold one result twice (or a directory holding
    two copies of one result.json) counts it once, so repeats and medians are not skewed."""
    if path.is_dir():
        found = _result_files(path)
        if not found:
            raise InputError("no result.json under this directory", file=str(path),
                             hint="point at the --out directory of servelab run")
        return _noted(dedupe_results([(str(p), _checked(p, _load_json(p))) for p in found]))
    data = _load_json(path)
    if isinstance(data, dict) and "results" in data:
        return _noted(dedupe_results([(f"{path}: results[{i}]",
                                       _checked(path, r, f"results[{i}]"))
                                      for i, r in enumerate(_summary_results(path, data))]))
    if isinstance(data, dict) and data.get("schemaVersion") == 1 and "arm" in data:
        return [_checked(path, data)], []
    raise InputError("neither a result.json nor a summary.json of servelab", file=str(path))


def result_key(r: dict[str, Any]) -> tuple[str, ...]:
    """What names one result: its run (id, machine, name), its arm and its repeat."""
    run = r.get("run") if isinstance(r.get("run"), dict) else {}
    return (str((run or {}).get("id")), str(r.get("arm")), str(r.get("repeat")),
            str((run or {}).get("machine")), str((run or {}).get("name")))


def _noted(got: tuple[list[dict[str, Any]], list[tuple[str, str]]]
           ) -> tuple[list[dict[str, Any]], list[str]]:
    return got[0], [f"{where}: {why}" for where, why in got[1]]


def dedupe_results(rows: list[tuple[str, dict[str, Any]]]
                   ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The results of (where, result) *rows*, each (run id, arm, repeat) once, the first
    kept; and (where, why) for each one left out, naming the first place too."""
    first: dict[tuple[str, ...], tuple[str, dict[str, Any]]] = {}
    notes: list[tuple[str, str]] = []
    for where, r in rows:
        key = result_key(r)
        if key not in first:
            first[key] = (where, r)
            continue
        was, kept = first[key]
        same = "" if kept == r else " (with different contents: the first is used)"
        notes.append((where, f"{key[1]} repeat {key[2]} of run {key[0]} is listed again "
                      f"(first at {was}){same}: counted once"))
    return [r for _, r in first.values()], notes


#: result.json files read from one directory (a run has arms x repeats of them).
MAX_RESULT_FILES = 10_000


def _result_files(path: Path) -> list[Path]:
    found: list[Path] = []
    for p in path.rglob(RESULT_FILE):  # symbolic links to directories are not followed
        found.append(p)
        if len(found) > MAX_RESULT_FILES:
            raise InputError(f"more than {MAX_RESULT_FILES} result.json files under this "
                             "directory", file=str(path),
                             hint="point at the --out directory of one run")
    return sorted(found)


def _summary_results(path: Path, data: dict[str, Any]) -> list[Any]:
    from servelab.spec import summary_results

    return summary_results(path, data)


def _checked(path: Path, data: Any, where: str = "") -> dict[str, Any]:
    from servelab.spec import checked_result

    return checked_result(path, data, where)
