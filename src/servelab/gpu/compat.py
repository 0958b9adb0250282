"""NVIDIA's minimum driver per CUDA major version, and an image's assessment against the host.

:func:`check_driver_table` applies the driver table; :func:`assess_image` combines it with
the NVIDIA_REQUIRE_* verdict into findings, before the image is started.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from servelab.findings import Finding, Severity
from servelab.gpu.findings import finding
from servelab.gpu.require import (
    _VERSION,
    RequirementResult,
    RequirementsVerdict,
    _legacy_major_minor,
    evaluate_requirements,
    requirements_from_env,
    split_expression,
    version_tuple,
)
from servelab.gpu.smi import HostGpuInfo

# --------------------------------------------------------------------------------------------
# NVIDIA's minimum driver per CUDA major version
# --------------------------------------------------------------------------------------------

#: the driver branch from which CUDA minor version compatibility holds for each CUDA major
MIN_DRIVER_BY_CUDA_MAJOR: dict[int, int] = {11: 450, 12: 525, 13: 580}


@dataclass(frozen=True)
class DriverCompat:
    """An image's CUDA version against the host driver, by NVIDIA's compatibility rules."""

    image_cuda: str | None
    driver_version: str | None
    driver_cuda: str | None
    #: ok | minor-compat | below-minimum | unknown
    status: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "image_cuda": self.image_cuda,
            "driver_version": self.driver_version,
            "driver_cuda": self.driver_cuda,
            "status": self.status,
            "message": self.message,
        }


def image_cuda_version(env: Mapping[str, str]) -> str | None:
    """The image's CUDA version: CUDA_VERSION, else the first ``cuda>=`` of NVIDIA_REQUIRE_CUDA."""
    v = env.get("CUDA_VERSION", "").strip()
    if v and _legacy_major_minor(v):
        return v.lstrip("v")
    return cuda_floor(env.get("NVIDIA_REQUIRE_CUDA", ""))


def cuda_floor(expr: str) -> str | None:
    """The version of the first ``cuda>=X.Y`` condition of an expression."""
    for alt in split_expression(expr):
        for c in alt:
            m = re.fullmatch(r"cuda>=(\d+(?:\.\d+)*)", c, flags=re.IGNORECASE | re.ASCII)
            if m:
                return m.group(1)
    return None


_MINOR_CAVEAT = (
    "it runs only by CUDA minor version compatibility: features of the newer minor release "
    "that need a newer driver fail with cudaErrorCallRequiresNewerDriver, and PTX built by "
    "the newer toolkit cannot be JIT-compiled by this driver (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), "
    "so kernels must be shipped as SASS (cubin) for the GPU"
)


def check_driver_table(
    image_cuda: str | None, driver_version: str | None, driver_cuda: str | None
) -> DriverCompat:
    """NVIDIA's table: CUDA 11.x needs driver >= 450, 12.x >= 525, 13.x >= 580."""

    def result(status: str, message: str) -> DriverCompat:
        return DriverCompat(image_cuda, driver_version, driver_cuda, status, message)

    img = version_tuple(image_cuda) if image_cuda and _VERSION.fullmatch(image_cuda) else ()
    drv = version_tuple(driver_version) if driver_version and _VERSION.fullmatch(
        driver_version) else ()
    if not img:
        return result("unknown", "the image declares no CUDA version (CUDA_VERSION or cuda>=)")
    if not drv:
        return result("unknown", "the host driver version is unknown")
    major = img[0]
    minimum = MIN_DRIVER_BY_CUDA_MAJOR.get(major)
    host = version_tuple(driver_cuda) if driver_cuda and _VERSION.fullmatch(driver_cuda) else ()
    if host and host[:2] >= (*img, 0)[:2]:
        return result("ok", f"driver {driver_version} supports CUDA {driver_cuda} >= the "
                      f"image's CUDA {image_cuda}")
    if minimum is None:
        return result("unknown", f"no minimum-driver entry for CUDA {major}.x "
                      f"(servelab knows {', '.join(f'{k}.x' for k in MIN_DRIVER_BY_CUDA_MAJOR)})")
    if drv[0] < minimum:
        return result("below-minimum", f"CUDA {major}.x needs driver >= {minimum}, the host has "
                      f"{driver_version}" + (f" (CUDA {driver_cuda})" if driver_cuda else ""))
    if not host:
        return result("ok", f"driver {driver_version} >= {minimum}, the minimum for CUDA "
                      f"{major}.x (the driver's own CUDA version is unknown)")
    return result("minor-compat", f"the image uses CUDA {image_cuda}, newer than the driver's "
                  f"CUDA {driver_cuda}; driver {driver_version} >= {minimum}, so " + _MINOR_CAVEAT)


# --------------------------------------------------------------------------------------------
# An image against the host
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageGpuAssessment:
    """An image's CUDA requirements against this host, before starting it."""

    verdict: RequirementsVerdict | None
    driver: DriverCompat | None
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "requirements": self.verdict.to_dict() if self.verdict else None,
            "driver": self.driver.to_dict() if self.driver else None,
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }


def assess_image(
    env: Mapping[str, str], host: HostGpuInfo, *, cdi: bool = False, gpu_required: bool = False,
    extra: Sequence[tuple[str, str]] = (),
) -> ImageGpuAssessment:
    """Check an image's environment (NVIDIA_REQUIRE_*, CUDA_VERSION) against *host*.

    *extra* adds (source, expression) requirements, e.g. from the command line.
    """
    declared = requirements_from_env(env)
    declared = replace(declared, requirements=declared.requirements + tuple(extra))
    notes: list[str] = []
    if cdi:
        notes.append("CDI mode: the NVIDIA container stack does not check NVIDIA_REQUIRE_*; "
                     "servelab's check below is the only one")
    if not host.available:
        sev = Severity.ERROR if gpu_required else None
        f = finding("gpu-unavailable", f"GPU unavailable: {host.reason}; the image's "
                    "requirements were not evaluated", severity=sev)
        return ImageGpuAssessment(None, None, (f,), tuple(notes))
    verdict = evaluate_requirements(declared, host.facts())
    cuda = image_cuda_version(env) or next(
        (c for c in (cuda_floor(e) for _, e in extra) if c), None)
    driver = check_driver_table(cuda, host.driver_version, host.cuda_version)
    found = _requirement_findings(verdict, cdi) + _driver_findings(driver, verdict)
    return ImageGpuAssessment(verdict, driver, tuple(found), tuple(notes + list(verdict.notes)))


def _requirement_findings(verdict: RequirementsVerdict, cdi: bool) -> list[Finding]:
    declared = verdict.declared
    # With NVIDIA_DISABLE_REQUIRE the runtime starts the container anyway: a failed
    # requirement is then a warning, and the driver table decides what is fatal.
    sev = Severity.WARNING if declared.disabled else None
    out = [finding("gpu-require-invalid", e, severity=sev) for e in declared.errors]
    if declared.disabled:
        out.append(finding("gpu-require-disabled", f"NVIDIA_DISABLE_REQUIRE="
                           f"{declared.disable_value}: the runtime will not enforce the "
                           "requirements; servelab's verdict follows"))
    if cdi and declared.requirements:
        out.append(finding("gpu-require-unchecked-cdi", "CDI mode: NVIDIA_REQUIRE_* is not "
                           "checked by the NVIDIA stack; servelab's check is the only one"))
    for r in verdict.results:
        ctx = {"variable": r.source} | ({"gpu": str(r.device)} if r.device is not None else {})
        if r.invalid:
            out.append(finding("gpu-require-invalid", r.explain(), severity=sev, context=ctx))
        elif not r.ok:
            msg = r.explain() + (f"; the NVIDIA hook reports: {r.nvidia_message}"
                                 if r.nvidia_message else "")
            out.append(finding("gpu-require-unsatisfied", msg, severity=sev, context=ctx))
        for bad in r.latent_invalid:
            out.append(finding("gpu-require-invalid", f"{r.source}: {bad} (not reached on "
                               "this host, but fatal where it is)", severity=Severity.WARNING,
                               context=ctx))
    return _dedupe(out)


def _dedupe(found: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in found:
        key = (f.rule_id, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _forward_compat_matches(verdict: RequirementsVerdict) -> list[RequirementResult]:
    return [r for r in verdict.results if r.ok and r.matched and not r.matched.startswith("cuda")]


def _driver_findings(driver: DriverCompat, verdict: RequirementsVerdict) -> list[Finding]:
    forward = _forward_compat_matches(verdict)
    if driver.status == "below-minimum":
        if forward:
            return [finding("gpu-forward-compat", f"{driver.message}; the image starts through "
                            f"forward compatibility ({forward[0].matched!r} matched), which "
                            "needs its cuda-compat libraries and a datacenter GPU")]
        return [finding("gpu-driver-below-minimum", driver.message)]
    if driver.status == "minor-compat":
        return [finding("gpu-minor-version-compat", driver.message)]
    return []
