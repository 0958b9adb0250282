"""The spec and the CLI share one check for every option both can set (the lazy pull's): the
same input is refused the same way, whichever of the two gives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli import main
from servelab.node.lazypull import MAX_MIN_LAYER_SIZE
from servelab.spec import load_schema

SPEC = """apiVersion: servelab/v1
kind: Experiment
metadata: {{name: one-validator}}
spec:
  change: c
  treatment: {{dockerfile: Dockerfile}}
  coldStart: {{{cold}}}
"""


def _spec(tmp_path: Path, cold: str) -> Path:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    p = tmp_path / "experiment.yaml"
    p.write_text(SPEC.format(cold=cold))
    return p


@pytest.mark.parametrize(("cold", "flags", "named"), [
    ("lazyRequired: true", [], "coldStart.lazyRequired"),
    ("", ["--require-lazy"], "--require-lazy"),
    ("lazy: [soci]", ["--lazy", "soci"], "--lazy"),
])
def test_a_required_lazy_pull_without_a_registry_is_refused_from_spec_or_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cold: str, flags: list[str],
        named: str) -> None:
    code = main(["run", str(_spec(tmp_path, cold)), "--out", str(tmp_path / "out"), *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert named in err and "need --cold-start-registry" in err


def test_the_min_layer_size_has_one_bound(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    schema = load_schema("experiment")
    assert str(MAX_MIN_LAYER_SIZE) in json.dumps(schema)  # the schema's maximum is the same
    for size in ("1.0e+30", str(MAX_MIN_LAYER_SIZE + 1)):
        assert main(["validate", str(_spec(tmp_path, f"lazyMinLayerSize: {size}"))]) == 2
        assert "maximum" in capsys.readouterr().out
    assert main(["run", str(_spec(tmp_path, "")), "--out", str(tmp_path / "o"),
                 "--lazy-min-layer-size", str(MAX_MIN_LAYER_SIZE + 1)]) == 2
    assert f"must be 0 to {MAX_MIN_LAYER_SIZE} bytes" in capsys.readouterr().err
    assert main(["validate", str(_spec(tmp_path, f"lazyMinLayerSize: {MAX_MIN_LAYER_SIZE}"))]) \
        == 0
