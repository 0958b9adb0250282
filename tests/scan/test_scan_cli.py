"""``servelab scan`` end to end, as a subprocess, on the fixture images."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from scanfixtures import Image, run_cli, scan_cli_argv

pytestmark = [pytest.mark.docker, pytest.mark.trivy]


def _args(cache: Path, *more: str) -> list[str]:
    return ["--offline", "--cache-dir", str(cache), *more]


def test_vulnerable_exits_1_and_lists_failing(images: dict[str, Image], trivy_cache: Path) -> None:
    done = run_cli(str(images["control"].archive), *_args(trivy_cache))
    assert done.returncode == 1, done.stderr
    assert "gate FAILED: 3 finding(s) at CRITICAL, HIGH" in done.stdout
    assert "HIGH CVE-2099-1001 openssl 3.0.11-1~deb12u2" in done.stdout
    assert "CRITICAL CVE-2099-2001 requests 2.31.0" in done.stdout
    assert "Trivy 0.76.0, DB updated" in done.stdout


def test_fixed_exits_0(images: dict[str, Image], trivy_cache: Path) -> None:
    done = run_cli(str(images["treatment"].layout), *_args(trivy_cache))
    assert done.returncode == 0, done.stderr
    assert "gate passed" in done.stdout


def test_fail_on_flag_and_none(images: dict[str, Image], trivy_cache: Path) -> None:
    target = str(images["treatment"].layout)
    assert run_cli(target, *_args(trivy_cache, "--fail-on", "medium")).returncode == 1
    assert run_cli(str(images["control"].layout),
                   *_args(trivy_cache, "--fail-on", "none")).returncode == 0


def test_fail_on_takes_finding_levels(images: dict[str, Image], trivy_cache: Path) -> None:
    """The one --fail-on grammar: on a scan, warning is MEDIUM and above, error CRITICAL,HIGH."""
    target = str(images["treatment"].layout)  # two MEDIUM findings, nothing above
    done = run_cli(target, *_args(trivy_cache, "--fail-on", "warning"))
    assert done.returncode == 1, done.stderr
    assert "gate FAILED: 2 finding(s) at CRITICAL, HIGH, MEDIUM" in done.stdout
    done = run_cli(target, *_args(trivy_cache, "--fail-on", "ERROR"))
    assert done.returncode == 0, done.stderr
    assert "gate passed: no finding at CRITICAL, HIGH" in done.stdout


def test_policy_from_spec(images: dict[str, Image], trivy_cache: Path, tmp_path: Path) -> None:
    spec = tmp_path / "experiment.yaml"
    spec.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: scan-test}\n"
        "spec:\n  change: scan policy from the spec\n  treatment: {image: x}\n"
        "  scan:\n    failOn: [MEDIUM]\n    offline: true\n"
        f"    cacheDir: {trivy_cache}\n"
    )
    # the cache lies outside the experiment's folder: only the command line can allow that
    done = run_cli(str(images["treatment"].layout), "--spec", str(spec))
    assert done.returncode == 2 and "scan.cacheDir" in done.stderr, done.stderr
    allow = f"--allow-path=cacheDir={trivy_cache}"
    done = run_cli(str(images["treatment"].layout), "--spec", str(spec), allow)
    assert done.returncode == 1, done.stderr
    assert "gate FAILED: 2 finding(s) at MEDIUM" in done.stdout
    # flags win over the spec
    done = run_cli(str(images["treatment"].layout), "--spec", str(spec), allow, "--fail-on",
                   "HIGH")
    assert done.returncode == 0, done.stderr


def test_repeats_with_one_digest_are_scanned_once(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    img = images["control"]
    copy = tmp_path / "repeat-3.tar"
    shutil.copyfile(img.archive, copy)
    out = tmp_path / "result.json"
    done = run_cli(str(img.archive), str(img.layout), str(copy),
                   *_args(trivy_cache, "--json", str(out), "--fail-on", "none"))
    assert done.returncode == 0, done.stderr
    assert "3 target(s), 1 distinct digest(s): scanned 1 time(s), 2 result(s) shared" \
        in done.stdout
    doc = json.loads(out.read_text())
    assert doc["scans"] == 1
    assert [r["shared"] for r in doc["results"]] == [False, True, True]
    assert {r["digest"] for r in doc["results"]} == {img.digest}


def test_outputs_and_baseline(images: dict[str, Image], trivy_cache: Path,
                              tmp_path: Path) -> None:
    base = tmp_path / "control.json"
    first = run_cli(str(images["control"].archive), *_args(trivy_cache, "--json", str(base)))
    assert first.returncode == 1
    sarif, sbom = tmp_path / "t.sarif", tmp_path / "t.cdx.json"
    done = run_cli(str(images["treatment"].archive),
                   *_args(trivy_cache, "--baseline", str(base), "--sarif", str(sarif),
                          "--sbom", str(sbom), "--format", "json"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    diff = doc["diffs"][0]
    assert diff["counts"] == {"new": 1, "fixed": 4, "unchanged": 1}
    assert [f["id"] for f in diff["new"]] == ["CVE-2099-2002"]
    assert json.loads(sarif.read_text())["runs"][0]["results"] == []  # nothing at HIGH+
    assert json.loads(sbom.read_text())["bomFormat"] == "CycloneDX"


def test_baseline_image_and_markdown(images: dict[str, Image], trivy_cache: Path) -> None:
    done = run_cli(str(images["treatment"].layout),
                   *_args(trivy_cache, "--baseline", str(images["control"].archive),
                          "--format", "markdown"))
    assert done.returncode == 0, done.stderr
    assert "### Vulnerability scan:" in done.stdout
    assert "| MEDIUM | 2 | 1 | 1 |" in done.stdout
    assert "1 new, 4 fixed, 1 unchanged." in done.stdout


@pytest.mark.parametrize("argv, needle", [
    (["/nonexistent/image.tar"], "does not exist"),
    (["--fail-on", "SEVERE"], "unknown severity"),
    (["--ignore-file", "/nonexistent/.trivyignore"], "does not exist"),
])
def test_bad_input_exits_2(argv: list[str], needle: str, images: dict[str, Image],
                           trivy_cache: Path) -> None:
    target = [] if argv[0].startswith("/") else [str(images["control"].layout)]
    done = run_cli(*target, *argv, *_args(trivy_cache))
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_files_in_the_working_directory_are_not_picked_up(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    """A stray .trivyignore or trivy.yaml in the cwd changes nothing: only the policy's."""
    (tmp_path / ".trivyignore").write_text("CVE-2099-1001\nCVE-2099-2001\n")
    (tmp_path / "trivy.yaml").write_text("severity:\n  - LOW\nscan:\n  scanners:\n    - vuln\n")
    out = tmp_path / "r.json"
    done = subprocess.run(
        [*scan_cli_argv(), str(images["control"].layout), *_args(trivy_cache, "--json",
                                                                 str(out))],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(out.read_text())["results"][0]
    assert {f["id"] for f in result["findings"]} == set(images["control"].spec.expect)
    assert result["suppressed"] == []


def test_several_digests_get_one_file_each(images: dict[str, Image], trivy_cache: Path,
                                           tmp_path: Path) -> None:
    sbom, sarif = tmp_path / "sbom.cdx.json", tmp_path / "scan.sarif"
    done = run_cli(str(images["control"].archive), str(images["treatment"].archive),
                   *_args(trivy_cache, "--sbom", str(sbom), "--sarif", str(sarif)))
    assert done.returncode == 1  # the control fails
    for img in images.values():
        short = img.digest.split(":")[1][:12]
        assert (tmp_path / f"sbom-{short}.cdx.json").is_file()
        assert (tmp_path / f"scan-{short}.sarif").is_file()
    assert not sbom.exists() and not sarif.exists()
