"""The calibration file (``calibration.json``, :mod:`servelab.run.calibrate` makes it): read
back, through the safe reader and its schema, by ``run --calibration``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CALIBRATION_FILE = "calibration.json"


def load(path: Path) -> dict[str, Any]:
    """A calibration file, read through the safe reader and checked against its schema."""
    from servelab.errors import InputError
    from servelab.spec import validator
    from servelab.textio import read_json

    data = read_json(path, what="calibration file",
                     hint="pass the calibration.json that servelab calibrate wrote")
    errors = sorted(validator("calibration").iter_errors(data), key=lambda e: e.path)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top)"
        raise InputError(f"not a servelab calibration file: {errors[0].message[:200]} at "
                         f"{where}", file=str(path),
                         hint="pass the calibration.json that servelab calibrate wrote")
    doc: dict[str, Any] = data
    return doc
