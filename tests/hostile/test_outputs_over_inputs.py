"""No output option may name a file the command reads (issue 31, "outputs over inputs, again
in new options"): ``scan --vex F --sarif F`` and ``validate -o <the Dockerfile the spec
names>`` overwrote an input, because the writer's list of inputs was fed only by servelab's
own reader, not by files handed to a tool (Trivy reads the VEX document) or only named
(validate checks the Dockerfile exists). Now every input option notes its file
(``commands._common.input_path``), every path an experiment names is noted where it is
resolved (``PathPolicy.confine``), and every output option is checked against all of them
once the command line is parsed (``commands._common.output_path``).

The tests enumerate every input/output option pair of scan and validate, and check that every
file option of every command is declared as an input or an output.

Test ids named in docs/limits.md: hostile-outputs-scan, hostile-outputs-validate,
hostile-outputs-declared."""

from __future__ import annotations

import argparse
import itertools
import shutil
from pathlib import Path

import pytest

from servelab.cli import build_parser
from servelab.commands._common import input_path, output_path

from .harness import run_servelab

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _options(command: str) -> tuple[list[str], list[str]]:
    """The input and the output options of *command* (positional inputs by their dest)."""
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    ins, outs = [], []
    for a in sub.choices[command]._actions:
        name = a.option_strings[-1] if a.option_strings else a.dest
        if a.type is input_path:
            ins.append(name)
        elif a.type is output_path:
            outs.append(name)
    return ins, outs


def _argv(option: str, value: str) -> list[str]:
    return [value] if not option.startswith("-") else [option, value]


SCAN_INS, SCAN_OUTS = _options("scan")


def test_scan_declares_its_inputs_and_outputs() -> None:
    assert set(SCAN_INS) == {"targets", "--spec", "--ignore-file", "--vex", "--baseline"}
    assert set(SCAN_OUTS) == {"--sarif", "--sbom", "--json", "--output"}


@pytest.mark.parametrize(("inp", "out"), list(itertools.product(SCAN_INS, SCAN_OUTS)))
@pytest.mark.parametrize("order", ["input-first", "output-first"])
def test_hostile_outputs_scan(tmp_path: Path, inp: str, out: str, order: str) -> None:
    shared = tmp_path / "shared.json"
    shared.write_text('{"kept": true}\n')
    pair = [*_argv(inp, str(shared)), *_argv(out, str(shared))]
    if order == "output-first":
        pair = [*_argv(out, str(shared)), *_argv(inp, str(shared))]
    target = [] if inp == "targets" else ["no-such-image:1"]
    got = run_servelab(["scan", *target, *pair], cwd=tmp_path, env=NO_ENGINE)
    assert got.code == 2, got.explain()
    assert "is an input of this command" in got.stderr, got.explain()
    assert shared.read_text() == '{"kept": true}\n'
    assert got.seconds < 10


def _example(tmp_path: Path) -> Path:
    ex = tmp_path / "ex"
    shutil.copytree(EXAMPLES, ex, ignore=shutil.ignore_patterns("model", "*.safetensors"))
    return ex


#: every file examples/experiment.yaml names, and the experiment itself
VALIDATE_INPUTS = ["experiment.yaml", "Dockerfile", "Dockerfile.control", "build-args.env"]


def test_validate_declares_its_inputs_and_outputs() -> None:
    ins, outs = _options("validate")
    assert ins == ["files"] and outs == ["--output"]


@pytest.mark.parametrize("name", VALIDATE_INPUTS)
def test_hostile_outputs_validate(tmp_path: Path, name: str) -> None:
    ex = _example(tmp_path)
    before = {p.name: p.read_bytes() for p in ex.iterdir() if p.is_file()}
    got = run_servelab(["validate", "experiment.yaml", "-o", name], cwd=ex)
    assert got.code == 2, got.explain()
    assert "is an input of this command" in got.stderr, got.explain()
    assert {p.name: p.read_bytes() for p in ex.iterdir() if p.is_file()} == before
    fine = run_servelab(["validate", "experiment.yaml", "-o", "report.txt"], cwd=ex)
    # another path is written (exit 2 here only because the copy holds no model)
    assert (ex / "report.txt").is_file() and "is an input" not in fine.stderr, fine.explain()


#: file options that are neither read nor written as files by the command itself
NOT_FILES = {("lint", "--context"), ("history", "--append-to"), ("smoke", "--writable")}
#: (--context is a directory; --append-to may be an input on purpose; --writable is a path
#: inside the container)


def test_hostile_outputs_declared() -> None:
    """Every option of every command that names a file is declared an input or an output
    (a new option without its type fails here): the pairs above then hold for it."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    loose = []
    for command, p in sub.choices.items():
        for a in p._actions:
            metavar = a.metavar if isinstance(a.metavar, str) else ""
            name = a.option_strings[-1] if a.option_strings else a.dest
            if ("FILE" in metavar or metavar in ("PATH", "EXPERIMENT", "DOCKERFILE", "MANIFEST")
                    or name == "--output") and (command, name) not in NOT_FILES \
                    and a.type not in (input_path, output_path):
                loose.append(f"{command} {name}")
    assert loose == []
