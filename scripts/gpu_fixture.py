#!/usr/bin/env python3
"""Turn a real ``scripts/gpu-check`` capture into servelab's GPU test data.

    python scripts/gpu_fixture.py CAPTURE_DIR [--data tests/data/gpu] [--name NAME] [--force]

CAPTURE_DIR is what ``scripts/gpu-check OUTDIR`` wrote on a machine with an NVIDIA GPU. This
writes two folders, named ``real-<YYYY-MM-DD>-<machine>`` from the capture's header (date,
GPU count and model, hostname):

* ``<data>/real-<...>/``: the whole capture, as the record of the last real GPU run;
* ``<data>/hosts/real-<...>/``: a test case for tests/gpu/test_gpu_smi.py: the ``query-gpu``
  and ``q`` outputs the stand-in nvidia-smi replays, and an ``expect.json`` whose values are
  read from the capture's **XML** (``nvidia-smi -q -x``) and the raw CSV columns, not from
  servelab's text parser, so the test compares two independent readings of one machine.

Only the standard library is used. Exit codes: 0 written, 2 bad input (not a capture, no GPU
in it, destination exists without --force).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "compute_cap")
#: files of a capture that the stand-in nvidia-smi replays (see tests/gpu/conftest.py)
REPLAYED = re.compile(r"^(query-gpu(-without-[\w.-]+)?|q)\.(out|rc)$")


class BadCapture(Exception):
    """The folder is not a usable capture of a GPU machine."""


def _header(capture: Path) -> dict[str, str]:
    path = capture / "header.txt"
    if not path.is_file():
        raise BadCapture(f"{path}: missing; is {capture} a folder written by scripts/gpu-check?")
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and not key.startswith(" "):
            out.setdefault(key.strip(), value.strip())
    if not re.match(r"\d{4}-\d{2}-\d{2}T", out.get("date", "")):
        raise BadCapture(f"{path}: no 'date: YYYY-MM-DDT...' line")
    return out


def _text(el: ET.Element | None, tag: str) -> str | None:
    if el is None:
        return None
    child = el.find(tag)
    value = (child.text or "").strip() if child is not None else ""
    return value or None


def _version(root: ET.Element, tags: tuple[str, ...]) -> str | None:
    for tag in tags:
        m = re.match(r"\d+(\.\d+)*", _text(root, tag) or "")
        if m:
            return m.group(0)
    return None


def _mib(text: str | None) -> int | None:
    m = re.fullmatch(r"(\d+) MiB", text or "")
    return int(m.group(1)) if m else None


def _na(value: str | None) -> str | None:
    return None if value is None or value.upper() in ("N/A", "[N/A]") else value


def read_xml(capture: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Host versions and one dict per GPU (keyed by UUID order of the XML) from ``-q -x``."""
    path = capture / "q-xml.xml"
    try:
        # a capture the developer made with scripts/gpu-check; expat resolves no external
        # entities and (2.4.1+) refuses entity-expansion bombs
        root = ET.parse(path).getroot()  # noqa: S314
    except (OSError, ET.ParseError) as e:
        raise BadCapture(f"{path}: not readable as nvidia-smi -q -x output ({e})") from e
    host = {
        "driver_version": _version(root, ("kmd_version", "driver_version")),
        "cuda_version": _version(root, ("cuda_umd_version", "cuda_version")),
    }
    gpus = [
        {
            "name": _text(g, "product_name"),
            "uuid": _text(g, "uuid"),
            "memory_total_mib": _mib(_text(g.find("fb_memory_usage"), "total")),
            "product_brand": _na(_text(g, "product_brand")),
            "architecture": _na(_text(g, "product_architecture")),
            "bus_id": g.get("id"),
        }
        for g in root.findall("gpu")
    ]
    return host, gpus


def read_csv(capture: Path) -> list[dict[str, str]]:
    """The rows of the capture's ``--query-gpu`` CSV, as raw strings by field name."""
    rc_file = capture / "query-gpu.rc"
    rc = rc_file.read_text().strip() if rc_file.is_file() else "0"
    path = capture / "query-gpu.out"
    if rc != "0" or not path.is_file():
        raise BadCapture(f"{capture}: nvidia-smi --query-gpu did not succeed (exit {rc}); "
                         "this capture has no GPU to make a test case of")
    rows = [r for r in csv.reader(path.read_text().splitlines(), skipinitialspace=True) if r]
    if not rows or any(len(r) != len(QUERY_FIELDS) for r in rows):
        raise BadCapture(f"{path}: expected {len(QUERY_FIELDS)} columns per row")
    return [dict(zip(QUERY_FIELDS, (c.strip() for c in r), strict=True)) for r in rows]


def expectation(capture: Path, header: dict[str, str]) -> dict[str, Any]:
    """expect.json for the capture: versions and GPUs from the XML, index and caps from CSV."""
    rows = read_csv(capture)
    host, xml_gpus = read_xml(capture)
    by_uuid = {g["uuid"]: g for g in xml_gpus}
    gpus = []
    for row in rows:
        g = by_uuid.get(row["uuid"])
        if g is None:
            raise BadCapture(f"{capture}: GPU {row['uuid']} of the CSV is not in the XML")
        cap = _na(row["compute_cap"])
        gpus.append({"index": int(row["index"]), **g, "compute_cap": cap})
    names = ", ".join(sorted({str(g["name"]) for g in gpus}))
    return {
        "_comment": f"captured on {header['date'][:10]} from {header.get('hostname', '?')} "
                    f"({len(gpus)} x {names}) by scripts/gpu-check; expectations read from "
                    "nvidia-smi -q -x and the raw CSV by scripts/gpu_fixture.py",
        "state": "available",
        **host,
        "gpus": gpus,
    }


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def fixture_name(header: dict[str, str], expect: dict[str, Any]) -> str:
    gpus = expect["gpus"]
    model = _slug(re.sub(r"(?i)^nvidia\s+", "", str(gpus[0]["name"])))
    host = _slug(header.get("hostname", "unknown"))
    return f"real-{header['date'][:10]}-{len(gpus)}x{model}-{host}"


def write(capture: Path, data: Path, name: str | None, force: bool) -> tuple[Path, Path]:
    header = _header(capture)
    expect = expectation(capture, header)
    name = name or fixture_name(header, expect)
    if not re.fullmatch(r"real-[a-z0-9][a-z0-9.-]*", name) or ".." in name:
        raise BadCapture(f"--name {name!r}: use 'real-' and then lower-case letters, digits, "
                         "dots and dashes")
    record, case = data / name, data / "hosts" / name
    for dest in (record, case):
        if dest.exists() and not force:
            raise BadCapture(f"{dest} exists; pass --force to replace it")
    for dest in (record, case):
        shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(capture, record)
    case.mkdir(parents=True)
    for f in sorted(capture.iterdir()):
        if REPLAYED.match(f.name):
            shutil.copy2(f, case / f.name)
    (case / "expect.json").write_text(json.dumps(expect, indent=2) + "\n", encoding="utf-8")
    return record, case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/gpu_fixture.py",
        description="Keep a real scripts/gpu-check capture as GPU test data (record + test case).",
    )
    ap.add_argument("capture", type=Path, help="the folder scripts/gpu-check wrote")
    ap.add_argument("--data", type=Path, default=ROOT / "tests" / "data" / "gpu",
                    help="the GPU test-data folder (default: tests/data/gpu)")
    ap.add_argument("--name", help="folder name (default: real-<date>-<N>x<model>-<hostname>)")
    ap.add_argument("--force", action="store_true", help="replace folders of the same name")
    args = ap.parse_args(argv)
    try:
        record, case = write(args.capture, args.data, args.name, args.force)
    except BadCapture as e:
        print(f"gpu_fixture: {e}", file=sys.stderr)
        return 2
    print(f"gpu_fixture: wrote {record} and {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
