"""nvidia-smi: ``--query-gpu`` CSV, the text of ``-q``, failure reasons, and the host's GPUs.

The only side effect is :func:`host_gpus`, which runs ``nvidia-smi`` through
:func:`servelab.proc.run`. Nothing here prints or exits.

All the nvidia-smi calls of one :func:`host_gpus` share one time budget (:data:`SMI_TIMEOUT`
seconds, ``SERVELAB_SMI_TIMEOUT`` to change it): a hung nvidia-smi (a wedged driver) costs
that budget once, its whole process group is killed, and nothing else is asked of it.
Numbers in its output are read as ASCII digits only.
"""

from __future__ import annotations

import csv
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError, ToolMissingError
from servelab.gpu.require import DeviceFacts, HostFacts
from servelab.textio import ascii_int

QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "compute_cap")
#: Seconds all nvidia-smi calls of one probe may take together (SERVELAB_SMI_TIMEOUT).
SMI_TIMEOUT = 30.0


def query_command(fields: Sequence[str] = QUERY_FIELDS) -> list[str]:
    """The nvidia-smi command line that lists the GPUs."""
    return ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


class SmiParseError(ValueError):
    """nvidia-smi printed something that is not in its documented format."""


#: nvidia-smi's "Product Brand" (NVML brand names) -> the lower-case names libnvidia-container
#: compares ``brand=`` against (the names NVIDIA's CUDA images list).
BRAND_KEYS: dict[str, str] = {
    "unknown": "unknown",
    "quadro": "quadro",
    "tesla": "tesla",
    "nvs": "nvs",
    "grid": "grid",
    "geforce": "geforce",
    "titan": "titan",
    "nvidia virtual applications": "vapps",
    "nvidia virtual pc": "vpc",
    "nvidia virtual compute server": "vcs",
    "nvidia rtx virtual workstation": "vws",
    "nvidia cloud gaming": "cloudgaming",
    "nvidia vgaming": "cloudgaming",
    "quadro rtx": "quadrortx",
    "nvidia rtx": "nvidiartx",
    "nvidia": "nvidia",
    "geforce rtx": "geforcertx",
    "titan rtx": "titanrtx",
}


def brand_key(product_brand: str | None) -> str | None:
    """libnvidia-container's name for an nvidia-smi "Product Brand" ("NVIDIA RTX" -> nvidiartx)."""
    if product_brand is None:
        return None
    norm = " ".join(product_brand.lower().split())
    if not norm or norm in ("n/a", "[n/a]"):
        return None
    return BRAND_KEYS.get(norm, norm.replace(" ", ""))


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    uuid: str
    driver_version: str | None
    memory_total_mib: int | None
    compute_cap: str | None
    product_brand: str | None = None
    architecture: str | None = None
    bus_id: str | None = None

    @property
    def brand(self) -> str | None:
        return brand_key(self.product_brand)

    @property
    def sm(self) -> str | None:
        """The SASS target name of this GPU's compute capability ("9.0" -> "sm_90")."""
        cap = parse_capability(self.compute_cap)
        return f"sm_{cap[0]}{cap[1]}" if cap else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "driver_version": self.driver_version,
            "memory_total_mib": self.memory_total_mib,
            "compute_cap": self.compute_cap,
            "sm": self.sm,
            "product_brand": self.product_brand,
            "brand": self.brand,
            "architecture": self.architecture,
            "bus_id": self.bus_id,
        }


def _na(value: str) -> str | None:
    v = value.strip()
    if not v or v.startswith("[") or v.upper() == "N/A":
        return None
    return v


def parse_capability(text: str | None) -> tuple[int, int] | None:
    """``"9.0"`` -> ``(9, 0)``; None when absent or malformed."""
    m = re.fullmatch(r"\s*([0-9]{1,4})\.([0-9]{1,4})\s*", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_query_gpu(text: str, fields: Sequence[str] = QUERY_FIELDS) -> list[GpuInfo]:
    """The GPUs in ``--query-gpu=... --format=csv,noheader,nounits`` output (one row each)."""
    gpus: list[GpuInfo] = []
    rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    for n, row in enumerate(rows, 1):
        if len(row) != len(fields):
            raise SmiParseError(
                f"row {n} of nvidia-smi --query-gpu has {len(row)} fields, expected "
                f"{len(fields)} ({', '.join(fields)}): {','.join(row)[:200]!r}"
            )
        rec = dict(zip(fields, (c.strip() for c in row), strict=True))
        index = ascii_int(rec["index"])
        if index is None:
            raise SmiParseError(f"row {n} of nvidia-smi --query-gpu: index {rec['index']!r}")
        mem = _na(rec.get("memory.total", ""))
        gpus.append(
            GpuInfo(
                index=index,
                name=rec["name"],
                uuid=rec["uuid"],
                driver_version=_na(rec.get("driver_version", "")),
                memory_total_mib=ascii_int(mem) if mem else None,
                compute_cap=_na(rec.get("compute_cap", "")),
            )
        )
    return gpus


@dataclass(frozen=True)
class SmiGpuSection:
    """The fields of one "GPU <bus id>" section of ``nvidia-smi -q``, nested keys joined by "/"."""

    bus_id: str
    fields: dict[str, str]

    def get(self, key: str) -> str | None:
        v = self.fields.get(key)
        return _na(v) if v is not None else None


@dataclass(frozen=True)
class SmiLog:
    """``nvidia-smi -q``: the header (driver and CUDA version) and one section per GPU."""

    header: dict[str, str]
    gpus: list[SmiGpuSection]

    @property
    def driver_version(self) -> str | None:
        """The kernel-mode driver's version: "KMD Version" (R610 on), else "Driver Version"."""
        return _header_version(self.header, DRIVER_KEYS)

    @property
    def cuda_version(self) -> str | None:
        """The driver's CUDA version: "CUDA UMD Version" (R610 on), else "CUDA Version"."""
        return _header_version(self.header, CUDA_KEYS)


#: The header keys of ``nvidia-smi -q`` that carry the driver's and its CUDA's version, newest
#: name first. From driver R610, nvidia-smi prints "KMD Version" and "CUDA UMD Version" and
#: keeps the old two with a "[Deprecated; will be removed in CUDA 14.0. ...]" suffix.
DRIVER_KEYS = ("KMD Version", "Driver Version")
CUDA_KEYS = ("CUDA UMD Version", "CUDA Version")

#: A version, optionally followed by nvidia-smi's bracketed remark ("13.3 [Deprecated; ...]")
_HEADER_VERSION = re.compile(r"(\d+(?:\.\d+)*)(?:\s+\[[^\]]*\])?", re.ASCII)


def _header_version(header: dict[str, str], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` whose value is a version; None for "N/A", "Not Found" or absent."""
    for key in keys:
        m = _HEADER_VERSION.fullmatch(header.get(key, "").strip())
        if m:
            return m.group(1)
    return None


_KV = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
_GPU_HEAD = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$")


def parse_smi_q(text: str) -> SmiLog:
    """Parse the text of ``nvidia-smi -q``.

    Lines are ``Key<spaces>: value``; a line without `` : `` opens a section whose children
    are indented deeper; ``GPU <bus id>`` at column 0 opens a GPU.
    """
    if "NVSMI LOG" not in text:
        raise SmiParseError("not the output of nvidia-smi -q (no 'NVSMI LOG' banner)")
    header: dict[str, str] = {}
    gpus: list[SmiGpuSection] = []
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("="):
            continue
        head = _GPU_HEAD.match(line)
        if head:
            gpus.append(SmiGpuSection(head.group(1), {}))
            stack = []
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        kv = _KV.match(line)
        if kv is None:
            stack.append((indent, line.strip()))
            continue
        key = "/".join([s for _, s in stack] + [kv.group(2).strip()])
        target = gpus[-1].fields if gpus and indent > 0 else header
        target.setdefault(key, kv.group(3).strip())
    return SmiLog(header, gpus)


#: (substring of nvidia-smi's message, reason shown to the user)
_SMI_FAILURES: tuple[tuple[str, str], ...] = (
    ("couldn't communicate with the nvidia driver",
     "the NVIDIA driver is not loaded or not reachable (nvidia-smi could not communicate "
     "with it)"),
    ("no devices were found", "no NVIDIA GPU was found (nvidia-smi: No devices were found)"),
    ("driver/library version mismatch",
     "the loaded NVIDIA kernel module and the user-space driver differ (reboot or reload "
     "the module)"),
    ("insufficient permissions", "nvidia-smi lacks permission to open the GPU devices"),
)


def classify_smi_failure(returncode: int | None, stdout: str, stderr: str) -> str:
    """Why nvidia-smi failed, in words, from its exit code and messages."""
    text = f"{stdout}\n{stderr}"
    low = text.lower()
    for needle, reason in _SMI_FAILURES:
        if needle in low:
            return reason
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"nvidia-smi exited with code {returncode}" + (f": {first[:200]}" if first else "")


# --------------------------------------------------------------------------------------------
# The host
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostGpuInfo:
    """What the host's NVIDIA stack reports. ``available`` False is a result, never a pass."""

    available: bool
    reason: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[GpuInfo, ...] = ()
    notes: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def state(self) -> str:
        return "available" if self.available else "unavailable"

    def facts(self) -> HostFacts:
        return HostFacts(
            driver_version=self.driver_version,
            cuda_version=self.cuda_version,
            devices=tuple(
                DeviceFacts(index=g.index, arch=g.compute_cap, brand=g.brand) for g in self.gpus
            ),
        )

    def to_dict(self, *, raw: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state,
            "reason": self.reason,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": [g.to_dict() for g in self.gpus],
            "notes": list(self.notes),
        }
        if raw:
            out["raw"] = dict(self.raw)
        return out


def unavailable(reason: str, **raw: str) -> HostGpuInfo:
    return HostGpuInfo(available=False, reason=reason, raw=dict(raw))


def merge_smi(gpus: Sequence[GpuInfo], log: SmiLog | None) -> list[GpuInfo]:
    """Add brand, product name and bus id from ``nvidia-smi -q`` (matched by UUID, else order)."""
    if log is None:
        return list(gpus)
    by_uuid = {s.get("GPU UUID"): s for s in log.gpus if s.get("GPU UUID")}
    out: list[GpuInfo] = []
    for n, g in enumerate(gpus):
        sec = by_uuid.get(g.uuid) or (log.gpus[n] if n < len(log.gpus) else None)
        if sec is None:
            out.append(g)
            continue
        out.append(
            replace(
                g,
                product_brand=sec.get("Product Brand"),
                architecture=sec.get("Product Architecture"),
                bus_id=sec.bus_id,
            )
        )
    return out


class _Budget:
    """The time left to all nvidia-smi calls of one probe."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def smi_timeout(default: float = SMI_TIMEOUT) -> float:
    """SERVELAB_SMI_TIMEOUT (seconds, a positive number) or *default*."""
    raw = os.environ.get("SERVELAB_SMI_TIMEOUT", "").strip()
    if re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,3})?", raw) and float(raw) > 0:
        return float(raw)
    return default


def _run_smi(args: list[str], budget: _Budget) -> proc.Completed:
    left = budget.left()
    if left <= 0:
        raise CommandError(["nvidia-smi", *args], returncode=None, stderr="", timed_out=True)
    return proc.run(["nvidia-smi", *args], check=False, timeout=left)


#: Fields a driver may not know (``compute_cap`` on older drivers such as 470;
#: ``driver_version`` should NVIDIA retire it after renaming the driver's version "KMD Version"
#: in R610): when nvidia-smi says one is "not a valid field to query", it is asked again
#: without it.
OPTIONAL_FIELDS = ("compute_cap", "driver_version", "memory.total")
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def _query(budget: _Budget) -> tuple[list[GpuInfo], dict[str, str]]:
    """Run and parse --query-gpu, dropping each optional field the driver says is not valid."""
    fields: list[str] = list(QUERY_FIELDS)
    while True:
        res = _run_smi(query_command(fields)[1:], budget)
        raw = {"query_gpu": res.stdout + res.stderr}
        bad = _INVALID_FIELD.search(res.stdout + res.stderr)
        if res.returncode == 0 or bad is None or bad.group(1) not in OPTIONAL_FIELDS:
            break
        if bad.group(1) not in fields:  # the same field refused twice: give up
            break
        fields.remove(bad.group(1))
    if res.returncode != 0:
        raise _SmiFailed(classify_smi_failure(res.returncode, res.stdout, res.stderr), raw)
    return parse_query_gpu(res.stdout, fields), raw


class _SmiFailed(Exception):
    def __init__(self, reason: str, raw: dict[str, str]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw


def host_gpus(*, require: bool = False, timeout: float | None = None) -> HostGpuInfo:
    """Ask nvidia-smi about the host's GPUs; *timeout* is the budget of all its calls
    together (default :func:`smi_timeout`).

    No nvidia-smi, no driver, no GPU, a hang or unparsable output give an *unavailable*
    result with the reason; with ``require=True`` they raise :class:`CapabilityError` (exit 3).
    """
    info = _host_gpus(_Budget(smi_timeout() if timeout is None else timeout))
    if require and not info.available:
        raise CapabilityError(
            f"a GPU is required but unavailable: {info.reason}",
            hint="run on a machine with an NVIDIA GPU and driver (nvidia-smi must list it), "
            "or drop the GPU requirement",
        )
    return info


def _host_gpus(budget: _Budget) -> HostGpuInfo:
    try:
        gpus, raw = _query(budget)
    except ToolMissingError:
        return unavailable("nvidia-smi not found on PATH (no NVIDIA driver installed)")
    except CommandError as e:
        if e.timed_out:
            return unavailable(
                f"nvidia-smi timed out after {budget.seconds:g}s (a hung driver?); it was "
                "stopped and not asked again (SERVELAB_SMI_TIMEOUT sets the budget)")
        return unavailable(f"nvidia-smi could not be run: {e.stderr.strip()[:200] or e.message}")
    except _SmiFailed as e:
        return unavailable(e.reason, **e.raw)
    except SmiParseError as e:
        return unavailable(f"unexpected nvidia-smi output: {e}")
    if not gpus:
        return unavailable("nvidia-smi listed no GPU", **raw)
    notes: list[str] = []
    log = _smi_q(budget, raw, notes)
    drivers = {g.driver_version for g in gpus if g.driver_version}
    return HostGpuInfo(
        available=True,
        driver_version=(log.driver_version if log else None) or next(iter(sorted(drivers)), None),
        cuda_version=log.cuda_version if log else None,
        gpus=tuple(merge_smi(gpus, log)),
        notes=tuple(notes),
        raw=raw,
    )


def _smi_q(budget: _Budget, raw: dict[str, str], notes: list[str]) -> SmiLog | None:
    try:
        res = _run_smi(["-q"], budget)
    except CommandError as e:
        notes.append(f"nvidia-smi -q failed ({e.message.splitlines()[0]}): brand and CUDA unknown")
        return None
    raw["q"] = res.stdout
    if res.returncode != 0:
        why = classify_smi_failure(res.returncode, res.stdout, res.stderr)
        notes.append(f"nvidia-smi -q failed ({why}): brand and driver CUDA version unknown")
        return None
    try:
        log = parse_smi_q(res.stdout)
    except SmiParseError as e:
        notes.append(f"nvidia-smi -q output not understood ({e}): brand and CUDA unknown")
        return None
    if log.cuda_version is None:
        notes.append("nvidia-smi -q reports no CUDA version (neither \"CUDA UMD Version\" nor "
                     "\"CUDA Version\"): cuda= conditions cannot be checked")
    return log

