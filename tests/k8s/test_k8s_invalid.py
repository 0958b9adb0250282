"""Bad input: malformed YAML, non-Kubernetes YAML, nothing to check -> a clear message, exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.cli import main
from servelab.errors import InputError
from servelab.k8s import check_manifests

INVALID = sorted((Path(__file__).resolve().parents[1] / "data" / "k8s" / "invalid").glob("*.yaml"))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_raises_input_error(
    path: Path, k8s_fixture: Callable[[Path], Any]
) -> None:
    wanted = k8s_fixture(path).errors
    assert wanted, f"{path.name} has no '# error:' line"
    with pytest.raises(InputError) as info:
        check_manifests([path])
    assert info.value.exit_code == 2
    for text in wanted:
        assert text in str(info.value)
    assert info.value.hint, "every input error says how to fix it"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_exits_2_without_traceback(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["k8s-check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("servelab k8s-check: ")
    assert "Traceback" not in err
    assert str(path) in err


def test_there_are_invalid_fixtures() -> None:
    assert len(INVALID) >= 8


def test_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"apiVersion: v1\nkind: Pod\nmetadata: {name: caf\xe9}\n")
    with pytest.raises(InputError, match="not UTF-8"):
        check_manifests([bad])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        check_manifests([tmp_path / "nope.yaml"])


def test_directory_without_yaml(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("nothing here\n")
    with pytest.raises(InputError, match=r"no \.yaml or \.yml file"):
        check_manifests([tmp_path])


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="billion laughs"):
        check_manifests([bomb])
