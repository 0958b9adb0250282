"""The GPU rules (:data:`RULES`) and :func:`finding`, which makes a finding of one of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from servelab.findings import Finding, Rule, RuleRegistry, Severity

#: The GPU rules. They have no check functions: smoke and gpu-probe report them.
RULES: RuleRegistry[Callable[..., Any]] = RuleRegistry()
for _rule in (
    Rule("gpu-unavailable", Severity.WARNING, "no usable NVIDIA GPU on this host",
         "Without nvidia-smi, a driver and a GPU nothing about CUDA can be checked; this is a "
         "distinct result, never a pass.",
         "run on a GPU machine (nvidia-smi must list the GPU); --require-gpu makes it exit 3"),
    Rule("gpu-require-unsatisfied", Severity.ERROR,
         "the image's NVIDIA_REQUIRE_* is not satisfied by this host",
         "The NVIDIA runtime hook refuses to start the container ('unsatisfied condition'); in "
         "CDI mode nothing checks it and CUDA fails later instead.",
         "update the host driver, or use an image built for an older CUDA"),
    Rule("gpu-require-invalid", Severity.ERROR,
         "the image's NVIDIA_REQUIRE_* or CUDA_VERSION cannot be parsed",
         "libnvidia-container stops with 'invalid expression' when it reaches such a condition.",
         "fix the expression: key (cuda, driver, arch, brand), operator (= != < <= > >=), value"),
    Rule("gpu-require-disabled", Severity.WARNING,
         "NVIDIA_DISABLE_REQUIRE turns off the runtime's requirement check",
         "The container starts even on a driver too old for its CUDA, and fails at CUDA "
         "initialisation instead; servelab still evaluates the requirement.",
         "remove NVIDIA_DISABLE_REQUIRE unless the image relies on minor version compatibility"),
    Rule("gpu-require-unchecked-cdi", Severity.INFO,
         "in CDI mode the NVIDIA stack does not check NVIDIA_REQUIRE_*",
         "With --device nvidia.com/gpu=... (CDI) no hook evaluates the requirement: servelab's "
         "check is the only one.", ""),
    Rule("gpu-driver-below-minimum", Severity.ERROR,
         "the host driver is older than NVIDIA's minimum for the image's CUDA major version",
         "CUDA 11.x needs driver >= 450, 12.x >= 525, 13.x >= 580 (minor version "
         "compatibility); below that only forward compatibility (cuda-compat, datacenter GPUs) "
         "can work.", "update the driver, or use an image built for an older CUDA major"),
    Rule("gpu-forward-compat", Severity.WARNING,
         "the image starts only through CUDA forward compatibility",
         "A brand/driver alternative of NVIDIA_REQUIRE_CUDA matched: the image's cuda-compat "
         "libraries replace the driver's, which works on datacenter GPUs only.",
         "update the driver to the image's CUDA major branch"),
    Rule("gpu-minor-version-compat", Severity.WARNING,
         "the image's CUDA minor version is newer than the driver's",
         "Minor version compatibility: the image runs, but features needing a newer driver fail "
         "and PTX of the newer toolkit cannot be JIT-compiled.",
         "update the driver, or ship SASS for the GPU's architecture"),
    Rule("gpu-torch-missing", Severity.INFO, "torch is not importable in the probed Python",
         "The CUDA initialisation, arch-list and matmul checks need PyTorch.", ""),
    Rule("gpu-torch-cuda-unavailable", Severity.ERROR,
         "torch is installed but CUDA does not initialise",
         "torch.cuda.is_available() is false on a host with a GPU: a CPU-only wheel, a driver "
         "too old for torch's CUDA, or no GPU visible to the process.",
         "install a torch wheel built for a CUDA the driver supports; check CUDA_VISIBLE_DEVICES"),
    Rule("gpu-arch-not-covered", Severity.ERROR,
         "torch has no kernels for the GPU's compute capability",
         "torch.cuda.get_arch_list() has neither SASS (sm_XY) for the GPU nor PTX (compute_XY) "
         "it can JIT: kernels fail with 'no kernel image is available'.",
         "use a torch build whose arch list includes the GPU (e.g. sm_90 for 9.0)"),
    Rule("gpu-arch-ptx-only", Severity.WARNING,
         "torch reaches the GPU only by PTX JIT compilation",
         "No SASS for the GPU: the driver JIT-compiles PTX at first use (slow start, and it "
         "fails when the driver is older than the toolkit that made the PTX).",
         "use a torch build with SASS for the GPU's architecture"),
    Rule("gpu-matmul-failed", Severity.ERROR, "a small matmul on the GPU failed or was wrong",
         "CUDA initialised but computing on the GPU did not work.", "see the probe's error"),
    Rule("gpu-probe-failed", Severity.ERROR, "the Python GPU probe did not run to the end",
         "The probe crashed, hung (CUDA initialisation can hang on a broken driver) or printed "
         "no result.", "run python -m servelab.gpu.torch_probe by hand to see why"),
):
    RULES.add(_rule)


def finding(rule_id: str, message: str, *, severity: Severity | None = None,
            context: Mapping[str, str] | None = None) -> Finding:
    """A finding of one of :data:`RULES` (its default severity unless *severity* is given)."""
    rule = RULES[rule_id]
    return Finding(rule_id, severity or rule.severity, message, fix=rule.fix or None,
                   source="servelab gpu", context=dict(context or {}))
