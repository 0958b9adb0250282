"""GPU and CUDA compatibility logic: nvidia-smi parsing, NVIDIA_REQUIRE_* evaluation, driver table.

Pure functions and small dataclasses; the only side effect is :func:`host_gpus`, which runs
``nvidia-smi`` through :func:`servelab.proc.run`. Nothing here prints or exits.

* :func:`parse_query_gpu` reads ``nvidia-smi --query-gpu=index,name,uuid,driver_version,
  memory.total,compute_cap --format=csv,noheader,nounits``.
* :func:`parse_smi_q` reads the text of ``nvidia-smi -q`` (not the ``-x`` XML): the driver's
  version and CUDA version ("KMD Version"/"CUDA UMD Version" from R610, "Driver Version"/
  "CUDA Version" before) and each GPU's "Product Name", "Product Brand" and "GPU UUID".
* :func:`evaluate_requirements` applies libnvidia-container's rules to an image's
  ``NVIDIA_REQUIRE_*`` variables (see docs/gpu.md for the exact semantics).
* :func:`check_driver_table` applies NVIDIA's minimum driver per CUDA major version.
* :func:`assess_image` and :func:`assess_probe` turn all of that into findings.

Modules: :mod:`~servelab.gpu.smi` (nvidia-smi and the host), :mod:`~servelab.gpu.require`
(NVIDIA_REQUIRE_*), :mod:`~servelab.gpu.compat` (driver table, image assessment),
:mod:`~servelab.gpu.findings` (the rules), :mod:`~servelab.gpu.host` (the Python probe and
``servelab gpu-probe``). Every public name is re-exported here.
"""

from __future__ import annotations

from servelab.gpu.compat import (
    MIN_DRIVER_BY_CUDA_MAJOR,
    DriverCompat,
    ImageGpuAssessment,
    assess_image,
    check_driver_table,
    cuda_floor,
    image_cuda_version,
)
from servelab.gpu.findings import (
    RULES,
    finding,
)
from servelab.gpu.host import (
    GpuProbeReport,
    assess_probe,
    parse_probe_output,
    probe_host,
    probe_script_text,
    run_python_probe,
)
from servelab.gpu.require import (
    LEGACY_BRANDS,
    OPERATORS,
    REQUIRE_KEYS,
    CheckedCondition,
    Condition,
    DeviceFacts,
    HostFacts,
    ImageRequirements,
    RequirementResult,
    RequirementsVerdict,
    RequirementSyntaxError,
    check_condition,
    compare_versions,
    evaluate_expression,
    evaluate_requirements,
    legacy_brand_key,
    parse_condition,
    parse_env_text,
    parse_expression,
    requirements_from_env,
    split_expression,
    version_tuple,
)
from servelab.gpu.smi import (
    BRAND_KEYS,
    QUERY_FIELDS,
    SMI_TIMEOUT,
    GpuInfo,
    HostGpuInfo,
    SmiGpuSection,
    SmiLog,
    SmiParseError,
    brand_key,
    classify_smi_failure,
    host_gpus,
    merge_smi,
    parse_capability,
    parse_query_gpu,
    parse_smi_q,
    query_command,
    unavailable,
)

# re-exported: the SASS/PTX coverage rule lives in the standalone probe
from servelab.gpu.torch_probe import arch_coverage

__all__ = [
    "BRAND_KEYS",
    "LEGACY_BRANDS",
    "MIN_DRIVER_BY_CUDA_MAJOR",
    "OPERATORS",
    "QUERY_FIELDS",
    "REQUIRE_KEYS",
    "RULES",
    "SMI_TIMEOUT",
    "CheckedCondition",
    "Condition",
    "DeviceFacts",
    "DriverCompat",
    "GpuInfo",
    "GpuProbeReport",
    "HostFacts",
    "HostGpuInfo",
    "ImageGpuAssessment",
    "ImageRequirements",
    "RequirementResult",
    "RequirementSyntaxError",
    "RequirementsVerdict",
    "SmiGpuSection",
    "SmiLog",
    "SmiParseError",
    "arch_coverage",
    "assess_image",
    "assess_probe",
    "brand_key",
    "check_condition",
    "check_driver_table",
    "classify_smi_failure",
    "compare_versions",
    "cuda_floor",
    "evaluate_expression",
    "evaluate_requirements",
    "finding",
    "host_gpus",
    "image_cuda_version",
    "legacy_brand_key",
    "merge_smi",
    "parse_capability",
    "parse_condition",
    "parse_env_text",
    "parse_expression",
    "parse_probe_output",
    "parse_query_gpu",
    "parse_smi_q",
    "probe_host",
    "probe_script_text",
    "query_command",
    "requirements_from_env",
    "run_python_probe",
    "split_expression",
    "unavailable",
    "version_tuple",
]
