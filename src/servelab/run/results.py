"""result.json of one repeat of one arm: build it, validate it, read it back."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab import __version__
from servelab.errors import InputError
from servelab.textio import write_text_atomic

RESULT_FILE = "result.json"
SUMMARY_FILE = "summary.json"


@dataclass
class StageOutcome:
    """What one stage of one repeat produced."""

    status: str  # ok, failed, skipped, error
    reason: str = ""
    seconds: float | None = None
    record: dict[str, Any] | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "reason": self.reason,
                               "seconds": self.seconds, "record": self.record}
        return out


def verdict(check: str, stage: str, passed: bool | None, reason: str) -> dict[str, Any]:
    return {"check": check, "stage": stage, "passed": passed, "reason": reason}


def host_facts() -> dict[str, Any]:
    return {"os": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "node": platform.node()}


def base_result(*, run: dict[str, Any], experiment: dict[str, Any], arm: str,
                repeat: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "servelab": {"version": __version__},
        "run": run,
        "experiment": experiment,
        "arm": arm,
        "repeat": repeat,
        "inputs": {"commit": None, "dockerfile_sha256": None, "context_sha256": None,
                   "model_sha256": None, "request_sha256": None, "source_date_epoch": None},
        "image": {"ref": None, "digest": None},
        "environment": {"host": host_facts()},
        "host": {"gpus": [], "cuda_driver_version": None},
        "spec": {},
        "stages": {},
        "metrics": {"digest": None},
        "verdicts": [],
        "files": {},
    }


def validate_result(data: dict[str, Any]) -> list[str]:
    from servelab.schema import validator

    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
            for e in validator("result").iter_errors(data)]


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise InputError("no such file", file=str(path)) from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"not valid JSON: {e}", file=str(path),
                         hint="give a result.json or summary.json written by servelab") from e


def load_results(path: Path) -> list[dict[str, Any]]:
    """The result dicts in a result.json, a summary.json, or a directory of artifacts."""
    if path.is_dir():
        found = sorted(path.rglob(RESULT_FILE))
        if not found:
            raise InputError("no result.json under this directory", file=str(path),
                             hint="point at the --out directory of servelab run")
        return [_checked(p, _load_json(p)) for p in found]
    data = _load_json(path)
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return [r for r in data["results"] if isinstance(r, dict)]
    if isinstance(data, dict) and data.get("schemaVersion") == 1 and "arm" in data:
        return [_checked(path, data)]
    raise InputError("neither a result.json nor a summary.json of servelab", file=str(path))


def _checked(path: Path, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InputError("not a servelab result", file=str(path))
    problems = validate_result(data)
    if problems:
        raise InputError(f"invalid result.json: {problems[0]}", file=str(path),
                         hint="was it written by another servelab version?")
    return data
