"""The NVIDIA_REQUIRE_* evaluator, the legacy CUDA_VERSION rule and NVIDIA's driver table.

Fixture files under tests/data/gpu/require/{accepted,refused}/ are image environments
(KEY=VALUE) whose header comments give the synthetic host and the expected verdict:

    # host (synthetic): driver=580.65.06 cuda=13.0 gpu=9.0/nvidia
    # matched: cuda>=12.4          (accepted: the alternative that satisfied it)
    # failed: cuda>=12.8           (refused: the first failing condition reported)
    # nvidia: requirement error: ...   (the message libnvidia-container prints)
    # driver-table: ok | minor-compat | below-minimum | unknown
    # findings: rule-id,rule-id    (exactly these rule ids, in any order)

accepted/ = the NVIDIA runtime hook starts the container; refused/ = it refuses it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab import gpu
from servelab.errors import InputError

REQUIRE = Path(__file__).resolve().parent.parent / "data" / "gpu" / "require"
CASES = sorted(REQUIRE.glob("*/*.env"))


def _header(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("# ") and ":" in line:
            key, _, value = line[2:].partition(":")
            out.setdefault(key.strip(), value.strip())
    return out


def _host(spec: str) -> gpu.HostGpuInfo:
    fields = spec.split()
    kv = dict(f.split("=", 1) for f in fields if not f.startswith("gpu="))
    gpus = []
    for n, f in enumerate(x for x in fields if x.startswith("gpu=")):
        cap, brand = f[4:].split("/")
        gpus.append(gpu.GpuInfo(n, f"GPU {n}", f"GPU-{n}", kv["driver"], 1024, cap,
                                product_brand=_printed_brand(brand)))
    return gpu.HostGpuInfo(True, driver_version=kv["driver"], cuda_version=kv["cuda"],
                           gpus=tuple(gpus))


def _printed_brand(key: str) -> str:
    printed = {v: k for k, v in gpu.BRAND_KEYS.items() if k != "nvidia vgaming"}[key]
    return printed.title() if printed != "nvidia" else "NVIDIA"


def test_fixture_folders_are_populated() -> None:
    assert len(list(REQUIRE.glob("accepted/*.env"))) >= 8
    assert len(list(REQUIRE.glob("refused/*.env"))) >= 5


@pytest.mark.parametrize("path", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_require_fixture(path: Path) -> None:
    head = _header(path)
    env = gpu.parse_env_text(path.read_text(), source=str(path))
    assert not any(k.startswith("#") for k in env)
    host = _host(head["host (synthetic)"])
    result = gpu.assess_image(env, host)
    verdict = result.verdict
    assert verdict is not None
    assert verdict.accepted is (path.parent.name == "accepted"), verdict.to_dict()
    if head.get("matched"):
        assert {r.matched for r in verdict.results if r.source == "NVIDIA_REQUIRE_CUDA"
                or r.source.startswith("CUDA_VERSION")} == {head["matched"]}
    if "failed" in head:
        _assert_failed(verdict, head["failed"])
    if "nvidia" in head:
        assert head["nvidia"] in {r.nvidia_message for r in verdict.results}
    assert result.driver is not None
    assert result.driver.status == head["driver-table"], result.driver.message
    want = {r for r in head.get("findings", "").split(",") if r}
    assert {f.rule_id for f in result.findings} == want, [f.message for f in result.findings]


def _assert_failed(verdict: gpu.RequirementsVerdict, condition: str) -> None:
    if condition == "CUDA_VERSION":
        assert any("CUDA_VERSION" in e for e in verdict.declared.errors)
        return
    firsts = []
    for r in verdict.failures():
        if r.invalid:
            firsts.append(r.invalid)
        else:
            firsts.append(r.failed_conditions()[0][1].text)
    assert any(condition in f for f in firsts), firsts


# --- the language, condition by condition ------------------------------------------------

H200 = gpu.HostFacts("580.65.06", "13.0", (gpu.DeviceFacts(0, "9.0", "nvidia"),))


def _eval(expr: str, host: gpu.HostFacts = H200) -> gpu.RequirementResult:
    dev = host.devices[0] if host.devices else None
    return gpu.evaluate_expression(expr, host, dev)


@pytest.mark.parametrize(
    ("expr", "ok"),
    [
        ("cuda>=12.4", True), ("cuda>=13.0", True), ("cuda>=13.1", False), ("cuda>13.0", False),
        ("cuda=13", True), ("cuda=13.0.0", True), ("cuda!=13.0", False), ("cuda<13.1", True),
        ("cuda<=12.9", False), ("driver>=580", True), ("driver>=580.65.06", True),
        ("driver<580.65.7", True), ("driver>580.65.06", False), ("driver=580.65.6", True),
        ("arch>=9.0", True), ("arch<9.0", False), ("arch=9", True),
        ("brand=nvidia", True), ("brand=NVIDIA", True), ("brand!=tesla", True),
        ("brand=tesla", False), ("CUDA>=12.0", True), ("Brand=Nvidia", True),
    ],
)
def test_single_conditions(expr: str, ok: bool) -> None:
    assert _eval(expr).ok is ok


@pytest.mark.parametrize(
    ("a", "op", "b", "ok"),
    [
        ("12.10", ">", "12.9", True),  # numeric, not lexical
        ("12.4", "=", "12.4.0", True), ("12.4.0.1", ">", "12.4", True),
        ("470.57.02", "<", "471", True), ("470", "<", "470.0.1", True),
        ("12.4", "<=", "12.4", True), ("10.0", "<", "9.9", False),
        ("12..4", "=", "12.4", True),  # libnvidia-container skips repeated dots
    ],
)
def test_compare_versions(a: str, op: str, b: str, ok: bool) -> None:
    assert gpu.compare_versions(a, op, b) is ok


def test_space_separates_alternatives_comma_joins_conditions() -> None:
    r = _eval("cuda>=14.0 brand=nvidia,driver>=580,driver<581")
    assert r.ok and r.matched == "brand=nvidia,driver>=580,driver<581"
    r = _eval("cuda>=14.0 brand=nvidia,driver>=590")
    assert not r.ok
    assert [c.text for _, c in r.failed_conditions()] == ["cuda>=14.0", "driver>=590"]


def test_empty_alternatives_and_conditions_are_skipped() -> None:
    r = _eval("  cuda>=14.0  ,brand=nvidia,,driver>=580, ")
    assert r.ok
    assert r.matched == "brand=nvidia,driver>=580"
    assert _eval("").ok  # an empty expression holds, as in libnvidia-container


def test_only_space_separates_alternatives() -> None:
    # a tab is not a separator for libnvidia-container: the key becomes "cuda>=14.0\tbrand"
    r = _eval("cuda>=14.0\tbrand=nvidia")
    assert not r.ok and r.invalid


@pytest.mark.parametrize(
    ("cond", "why"),
    [
        ("gpu=h100", "unknown key"), ("cuda==12.4", "unknown operator"),
        ("cuda=>12.4", "unknown operator"), ("cuda>=", "no value"), (">=12.4", "no key"),
        ("cuda12.4", "no operator"), ("brand>=tesla", "only = or !="),
        ("driver>=r535", "not a version"), ("cuda>=12.4-rc1", "not a version"),
    ],
)
def test_invalid_conditions(cond: str, why: str) -> None:
    with pytest.raises(gpu.RequirementSyntaxError, match=why):
        gpu.parse_condition(cond)
    assert isinstance(gpu.RequirementSyntaxError("x"), InputError)


def test_invalid_condition_only_fatal_when_reached() -> None:
    reached = _eval("cuda>=14.0 gpu=h100")
    assert not reached.ok and reached.invalid and "unknown key" in reached.invalid
    assert reached.nvidia_message == "requirement error: invalid expression"
    skipped = _eval("cuda>=12.0 gpu=h100")
    assert skipped.ok and skipped.invalid is None
    assert skipped.latent_invalid and "gpu=h100" in skipped.latent_invalid[0]
    # within an alternative, evaluation stops at the first false condition too
    lazy = _eval("cuda>=14.0,gpu=h100 cuda>=12.0")
    assert lazy.ok and len(lazy.latent_invalid) == 1
    both = _eval("cuda>=14.0 foo=1 bar=2")
    assert both.invalid and "foo" in both.invalid
    assert len(both.latent_invalid) == 1 and "bar" in both.latent_invalid[0]


def test_nvidia_message_quotes_the_first_alternative() -> None:
    r = _eval("cuda>=14.0 brand=tesla,driver>=470,driver<471")
    assert r.nvidia_message == (
        "requirement error: unsatisfied condition: cuda>=14.0, please update your driver to a "
        "newer version, or use an earlier cuda container"
    )
    assert _eval("arch>=10.0").nvidia_message == (
        "requirement error: unsatisfied condition: arch>=10.0"
    )
    assert "'cuda>=14.0' fails on cuda>=14.0: NOT met (host has 13.0)" in r.explain()
    assert "1 alternative(s) are for other brands than this GPU's brand=nvidia (tesla)" in (
        r.explain())


def test_unknown_host_facts_count_as_met_and_are_listed() -> None:
    host = gpu.HostFacts("580.65.06", None, ())
    r = gpu.evaluate_expression("cuda>=99.0,arch>=12.0,brand=tesla,driver>=580", host, None)
    assert r.ok
    assert r.assumed == ("arch>=12.0", "brand=tesla", "cuda>=99.0")
    assert not gpu.evaluate_expression("driver>=600", host, None).ok


def test_every_visible_gpu_must_satisfy_every_requirement() -> None:
    host = gpu.HostFacts("580.65.06", "13.0", (
        gpu.DeviceFacts(0, "9.0", "nvidia"), gpu.DeviceFacts(1, "8.6", "nvidiartx")))
    declared = gpu.requirements_from_env({
        "NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=8.9"})
    v = gpu.evaluate_requirements(declared, host)
    assert not v.ok and not v.accepted
    assert [(r.source, r.device) for r in v.failures()] == [("NVIDIA_REQUIRE_ARCH", 1)]
    assert len(v.results) == 4


def test_requirements_from_env_rules() -> None:
    env = {
        "NVIDIA_REQUIRE_CUDA": "cuda>=12.4", "NVIDIA_REQUIRE_ARCH": "arch>=8.0",
        "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all", "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS": "x",
        "CUDA_VERSION": "12.4.1",
    }
    d = gpu.requirements_from_env(env)
    assert d.requirements == (("NVIDIA_REQUIRE_ARCH", "arch>=8.0"),
                              ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"))
    assert not d.legacy and not d.disabled


@pytest.mark.parametrize(
    ("version", "expr"),
    [("12.4.1", "cuda>=12.4"), ("v11.8", "cuda>=11.8"), ("12", "cuda>=12.0"),
     ("10.2.89", "cuda>=10.2"), ("12.4.1-rc1", "cuda>=12.4")],
)
def test_legacy_cuda_version(version: str, expr: str) -> None:
    d = gpu.requirements_from_env({"CUDA_VERSION": version})
    assert d.legacy and d.requirements == (("CUDA_VERSION (legacy)", expr),)


@pytest.mark.parametrize("version", ["12.4.1.2", "twelve", "012.4"])
def test_legacy_cuda_version_unparsable(version: str) -> None:
    d = gpu.requirements_from_env({"CUDA_VERSION": version})
    assert d.requirements == () and d.errors


def test_legacy_rule_not_used_when_nvidia_require_cuda_is_set() -> None:
    d = gpu.requirements_from_env({"CUDA_VERSION": "12.4.1", "NVIDIA_REQUIRE_CUDA": "cuda>=11"})
    assert not d.legacy and d.requirements == (("NVIDIA_REQUIRE_CUDA", "cuda>=11"),)


@pytest.mark.parametrize(
    ("value", "disabled"),
    [("true", True), ("1", True), ("T", True), ("True", True), ("TRUE", True),
     ("false", False), ("0", False), ("yes", False), ("", False), ("on", False)],
)
def test_disable_require_uses_go_parsebool(value: str, disabled: bool) -> None:
    d = gpu.requirements_from_env({"NVIDIA_DISABLE_REQUIRE": value, "CUDA_VERSION": "99.0"})
    assert d.disabled is disabled
    v = gpu.evaluate_requirements(d, H200)
    assert not v.ok and v.accepted is disabled


def test_legacy_brand_difference_is_noted() -> None:
    expr = "cuda>=14.0 brand=unknown,driver>=580,driver<581"
    host = gpu.HostFacts("580.65.06", "13.0", (gpu.DeviceFacts(0, "9.0", "nvidia"),))
    v = gpu.evaluate_requirements(gpu.requirements_from_env({"NVIDIA_REQUIRE_CUDA": expr}), host)
    assert not v.ok
    assert v.notes and "older libnvidia-container" in v.notes[0]
    assert "brand=unknown" in v.notes[0]


def test_cdi_mode_says_servelab_is_the_only_check() -> None:
    host = gpu.HostGpuInfo(True, driver_version="580.65.06", cuda_version="13.0", gpus=(
        gpu.GpuInfo(0, "NVIDIA H200", "GPU-0", "580.65.06", 143771, "9.0", "NVIDIA"),))
    res = gpu.assess_image({"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, host, cdi=True)
    assert "gpu-require-unchecked-cdi" in {f.rule_id for f in res.findings}
    assert any("only one" in n for n in res.notes)
    assert res.ok


def test_unavailable_host_is_not_evaluated() -> None:
    host = gpu.unavailable("nvidia-smi not found on PATH")
    res = gpu.assess_image({"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, host)
    assert res.verdict is None
    assert [f.rule_id for f in res.findings] == ["gpu-unavailable"]
    assert res.findings[0].severity.value == "warning"
    assert res.ok
    required = gpu.assess_image({"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, host, gpu_required=True)
    assert required.findings[0].severity.value == "error" and not required.ok


# --- NVIDIA's minimum driver by CUDA major ------------------------------------------------

@pytest.mark.parametrize(
    ("image", "driver", "driver_cuda", "status"),
    [
        ("12.4.1", "580.65.06", "13.0", "ok"),
        ("13.0.0", "580.65.06", "13.0", "ok"),
        ("13.1", "580.65.06", "13.0", "minor-compat"),
        ("12.8.1", "535.104.05", "12.2", "minor-compat"),
        ("12.0", "525.60.13", "12.0", "ok"),
        ("12.4", "520.61.05", "11.8", "below-minimum"),
        ("13.0", "575.57.08", "12.9", "below-minimum"),
        ("11.8.0", "450.80.02", "11.0", "minor-compat"),
        ("11.0", "418.226.00", "10.1", "below-minimum"),
        ("10.2", "418.226.00", "10.1", "unknown"),
        ("14.0", "590.1", "13.1", "unknown"),
        (None, "580.65.06", "13.0", "unknown"),
        ("12.4", None, None, "unknown"),
        ("12.4", "560.35.03", None, "ok"),
    ],
)
def test_driver_table(image: str | None, driver: str | None, driver_cuda: str | None,
                      status: str) -> None:
    res = gpu.check_driver_table(image, driver, driver_cuda)
    assert res.status == status, res.message
    if status == "minor-compat":
        assert "PTX" in res.message and "minor version compatibility" in res.message
    if status == "below-minimum":
        minimum = gpu.MIN_DRIVER_BY_CUDA_MAJOR[int(image.split(".")[0])]  # type: ignore[union-attr]
        assert f">= {minimum}" in res.message


def test_driver_table_values() -> None:
    assert gpu.MIN_DRIVER_BY_CUDA_MAJOR == {11: 450, 12: 525, 13: 580}


def test_image_cuda_version_sources() -> None:
    assert gpu.image_cuda_version({"CUDA_VERSION": "12.8.1"}) == "12.8.1"
    assert gpu.image_cuda_version({"NVIDIA_REQUIRE_CUDA": "brand=tesla,driver>=470 cuda>=12.4"}
                                  ) == "12.4"
    assert gpu.image_cuda_version({}) is None


# --- environment input --------------------------------------------------------------------

def test_env_text_forms() -> None:
    assert gpu.parse_env_text("A=1\n# c\n\nB=x=y\nC=\n") == {"A": "1", "B": "x=y", "C": ""}
    inspect = '[{"Id": "sha256:x", "Config": {"Env": ["PATH=/bin", "CUDA_VERSION=12.4.1"]}}]'
    assert gpu.parse_env_text(inspect)["CUDA_VERSION"] == "12.4.1"
    with pytest.raises(InputError, match="KEY=VALUE") as exc:
        gpu.parse_env_text("A=1\nnot a line\n", source="img.env")
    assert exc.value.line == 2
    with pytest.raises(InputError, match=r"Config\.Env"):
        gpu.parse_env_text('{"Config": {}}')
    with pytest.raises(InputError, match="invalid JSON"):
        gpu.parse_env_text("[{")
