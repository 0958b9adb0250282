"""GPU and CUDA compatibility logic: nvidia-smi parsing, NVIDIA_REQUIRE_* evaluation, driver table.

Pure functions and small dataclasses; the only side effect is :func:`host_gpus`, which runs
``nvidia-smi`` through :func:`servelab.proc.run`. Nothing here prints or exits.

* :func:`parse_query_gpu` reads ``nvidia-smi --query-gpu=index,name,uuid,driver_version,
  memory.total,compute_cap --format=csv,noheader,nounits``.
* :func:`parse_smi_q` reads the text of ``nvidia-smi -q`` (not the ``-x`` XML): the driver's
  "CUDA Version" and each GPU's "Product Name", "Product Brand" and "GPU UUID".
* :func:`evaluate_requirements` applies libnvidia-container's rules to an image's
  ``NVIDIA_REQUIRE_*`` variables (see docs/gpu.md for the exact semantics).
* :func:`check_driver_table` applies NVIDIA's minimum driver per CUDA major version.
* :func:`assess_image` and :func:`assess_probe` turn all of that into findings.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError, InputError, ToolMissingError
from servelab.findings import Finding, Rule, Severity

# re-exported (explicitly, for mypy): the SASS/PTX coverage rule lives in the standalone probe
from servelab.gpu_probe_py import arch_coverage as arch_coverage  # noqa: PLC0414

# --------------------------------------------------------------------------------------------
# nvidia-smi output
# --------------------------------------------------------------------------------------------

QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "compute_cap")
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
#: The brands older libnvidia-container releases know; they report every other one as "unknown".
LEGACY_BRANDS = frozenset({"quadro", "tesla", "nvs", "grid", "geforce", "titan"})


def brand_key(product_brand: str | None) -> str | None:
    """libnvidia-container's name for an nvidia-smi "Product Brand" ("NVIDIA RTX" -> nvidiartx)."""
    if product_brand is None:
        return None
    norm = " ".join(product_brand.lower().split())
    if not norm or norm in ("n/a", "[n/a]"):
        return None
    return BRAND_KEYS.get(norm, norm.replace(" ", ""))


def legacy_brand_key(key: str | None) -> str | None:
    """The brand older libnvidia-container releases report: the six classic ones, else unknown."""
    if key is None:
        return None
    return key if key in LEGACY_BRANDS else "unknown"


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
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text or "")
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
        if not rec["index"].isdigit():
            raise SmiParseError(f"row {n} of nvidia-smi --query-gpu: index {rec['index']!r}")
        mem = _na(rec.get("memory.total", ""))
        gpus.append(
            GpuInfo(
                index=int(rec["index"]),
                name=rec["name"],
                uuid=rec["uuid"],
                driver_version=_na(rec["driver_version"]),
                memory_total_mib=int(mem) if mem and mem.isdigit() else None,
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
        return _na(self.header.get("Driver Version", ""))

    @property
    def cuda_version(self) -> str | None:
        v = _na(self.header.get("CUDA Version", ""))
        return v if v and re.fullmatch(r"\d+(\.\d+)*", v) else None


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


def _run_smi(args: list[str], timeout: float) -> proc.Completed:
    return proc.run(["nvidia-smi", *args], check=False, timeout=timeout)


def _query(timeout: float) -> tuple[list[GpuInfo], dict[str, str]]:
    """Run and parse --query-gpu; retry without compute_cap on drivers that lack the field."""
    fields: Sequence[str] = QUERY_FIELDS
    res = _run_smi(query_command(fields)[1:], timeout)
    raw = {"query_gpu": res.stdout + res.stderr}
    if res.returncode != 0 and "compute_cap" in (res.stdout + res.stderr):
        fields = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
        res = _run_smi(query_command(fields)[1:], timeout)
        raw["query_gpu"] = res.stdout + res.stderr
    if res.returncode != 0:
        raise _SmiFailed(classify_smi_failure(res.returncode, res.stdout, res.stderr), raw)
    return parse_query_gpu(res.stdout, fields), raw


class _SmiFailed(Exception):
    def __init__(self, reason: str, raw: dict[str, str]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw


def host_gpus(*, require: bool = False, timeout: float = SMI_TIMEOUT) -> HostGpuInfo:
    """Ask nvidia-smi about the host's GPUs.

    No nvidia-smi, no driver, no GPU, a hang or unparsable output give an *unavailable*
    result with the reason; with ``require=True`` they raise :class:`CapabilityError` (exit 3).
    """
    info = _host_gpus(timeout)
    if require and not info.available:
        raise CapabilityError(
            f"a GPU is required but unavailable: {info.reason}",
            hint="run on a machine with an NVIDIA GPU and driver (nvidia-smi must list it), "
            "or drop the GPU requirement",
        )
    return info


def _host_gpus(timeout: float) -> HostGpuInfo:
    try:
        gpus, raw = _query(timeout)
    except ToolMissingError:
        return unavailable("nvidia-smi not found on PATH (no NVIDIA driver installed)")
    except CommandError as e:
        what = "timed out" if e.timed_out else "could not be run"
        return unavailable(f"nvidia-smi {what}: {e.stderr.strip()[:200] or e.message}")
    except _SmiFailed as e:
        return unavailable(e.reason, **e.raw)
    except SmiParseError as e:
        return unavailable(f"unexpected nvidia-smi output: {e}")
    if not gpus:
        return unavailable("nvidia-smi listed no GPU", **raw)
    notes: list[str] = []
    log = _smi_q(timeout, raw, notes)
    drivers = {g.driver_version for g in gpus if g.driver_version}
    return HostGpuInfo(
        available=True,
        driver_version=(log.driver_version if log else None) or next(iter(sorted(drivers)), None),
        cuda_version=log.cuda_version if log else None,
        gpus=tuple(merge_smi(gpus, log)),
        notes=tuple(notes),
        raw=raw,
    )


def _smi_q(timeout: float, raw: dict[str, str], notes: list[str]) -> SmiLog | None:
    try:
        res = _run_smi(["-q"], timeout)
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
        notes.append("nvidia-smi -q reports no CUDA Version: cuda= conditions cannot be checked")
    return log


# --------------------------------------------------------------------------------------------
# NVIDIA_REQUIRE_* (libnvidia-container's requirement language)
# --------------------------------------------------------------------------------------------

REQUIRE_KEYS = ("cuda", "driver", "arch", "brand")
#: libnvidia-container's operator table; the whole run of operator characters must match one.
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_OP_CHARS = "<>=!"
_VERSION = re.compile(r"\d+(?:\.+\d+)*\.*")


class RequirementSyntaxError(InputError):
    """A requirement expression libnvidia-container would reject as "invalid expression"."""


@dataclass(frozen=True)
class Condition:
    key: str
    op: str
    value: str

    @property
    def text(self) -> str:
        return f"{self.key}{self.op}{self.value}"


def parse_condition(text: str) -> Condition:
    """``"driver>=470"`` -> Condition; RequirementSyntaxError as libnvidia-container would."""
    key_end = next((i for i, c in enumerate(text) if c in _OP_CHARS), len(text))
    key = text[:key_end]
    op_end = key_end
    while op_end < len(text) and text[op_end] in _OP_CHARS:
        op_end += 1
    op, value = text[key_end:op_end], text[op_end:]
    if not key:
        raise RequirementSyntaxError(f"invalid expression {text!r}: no key before the operator")
    if not op:
        raise RequirementSyntaxError(f"invalid expression {text!r}: no operator (= != < <= > >=)")
    if op not in OPERATORS:
        raise RequirementSyntaxError(f"invalid expression {text!r}: unknown operator {op!r}")
    if not value:
        raise RequirementSyntaxError(f"invalid expression {text!r}: no value after {op!r}")
    lkey = key.lower()
    if lkey not in REQUIRE_KEYS:
        raise RequirementSyntaxError(
            f"invalid expression {text!r}: unknown key {key!r} (use cuda, driver, arch or brand)"
        )
    if lkey == "brand" and op not in ("=", "!="):
        raise RequirementSyntaxError(f"invalid expression {text!r}: brand takes only = or !=")
    if lkey != "brand" and not _VERSION.fullmatch(value):
        raise RequirementSyntaxError(
            f"invalid expression {text!r}: {value!r} is not a version (digits and dots)"
        )
    return Condition(lkey, op, value)


def split_expression(expr: str) -> list[list[str]]:
    """Alternatives (split on single spaces) of conditions (split on commas); empties dropped."""
    alts = []
    for alt in expr.split(" "):
        conds = [c for c in alt.split(",") if c]
        if conds:
            alts.append(conds)
    return alts


def parse_expression(expr: str) -> list[list[Condition]]:
    """Every condition of *expr* parsed; raises RequirementSyntaxError on the first invalid one."""
    return [[parse_condition(c) for c in alt] for alt in split_expression(expr)]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p)


def compare_versions(actual: str, op: str, wanted: str) -> bool:
    """Numeric per component, missing components count as 0 ("12.4" == "12.4.0")."""
    a, b = version_tuple(actual), version_tuple(wanted)
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return {
        "=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
    }[op]


@dataclass(frozen=True)
class DeviceFacts:
    """What libnvidia-container knows of one visible GPU: arch = compute capability, brand key."""

    index: int
    arch: str | None
    brand: str | None


@dataclass(frozen=True)
class HostFacts:
    driver_version: str | None
    cuda_version: str | None
    devices: tuple[DeviceFacts, ...] = ()


@dataclass(frozen=True)
class CheckedCondition:
    text: str
    ok: bool
    actual: str | None
    #: the host fact was unknown, and libnvidia-container counts such a condition as met
    assumed: bool = False
    invalid: str | None = None

    def describe(self) -> str:
        if self.invalid:
            return f"{self.text}: {self.invalid}"
        state = "met" if self.ok else "NOT met"
        if self.assumed:
            return f"{self.text}: assumed met (host value unknown)"
        return f"{self.text}: {state} (host has {self.actual})"


def _fact(cond: Condition, host: HostFacts, dev: DeviceFacts | None) -> str | None:
    if cond.key == "cuda":
        return host.cuda_version
    if cond.key == "driver":
        return host.driver_version
    if dev is None:
        return None
    return dev.arch if cond.key == "arch" else dev.brand


def check_condition(text: str, host: HostFacts, dev: DeviceFacts | None) -> CheckedCondition:
    try:
        cond = parse_condition(text)
    except RequirementSyntaxError as e:
        return CheckedCondition(text, False, None, invalid=e.message)
    actual = _fact(cond, host, dev)
    if actual is None or (cond.key != "brand" and not _VERSION.fullmatch(actual)):
        return CheckedCondition(text, True, actual, assumed=True)
    if cond.key == "brand":
        same = actual.lower() == cond.value.lower()
        return CheckedCondition(text, same if cond.op == "=" else not same, actual)
    return CheckedCondition(text, compare_versions(actual, cond.op, cond.value), actual)


@dataclass(frozen=True)
class RequirementResult:
    """One NVIDIA_REQUIRE_* value evaluated for one device (or for no device)."""

    source: str
    expression: str
    device: int | None
    ok: bool
    #: the alternative that satisfied it, as written
    matched: str | None
    #: per alternative: its text and every condition checked (all of them, for the explanation)
    alternatives: tuple[tuple[str, tuple[CheckedCondition, ...]], ...]
    #: libnvidia-container would stop with "invalid expression" (reached an invalid condition)
    invalid: str | None = None
    #: invalid conditions in alternatives libnvidia-container never reached on this host
    latent_invalid: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()

    @property
    def nvidia_message(self) -> str | None:
        """The error libnvidia-container prints for this result (None when it passes)."""
        if self.invalid:
            return "requirement error: invalid expression"
        if self.ok:
            return None
        first = self.expression.split(" ")[0]
        msg = f"requirement error: unsatisfied condition: {first}"
        if first.startswith("cuda>="):
            msg += (", please update your driver to a newer version, or use an earlier cuda "
                    "container")
        return msg

    def failed_conditions(self) -> list[tuple[str, CheckedCondition]]:
        """For each alternative, its first failing condition (what made that alternative false)."""
        out = []
        for alt, conds in self.alternatives:
            bad = next((c for c in conds if not c.ok), None)
            if bad is not None:
                out.append((alt, bad))
        return out

    def explain(self, limit: int = 3) -> str:
        """Which condition failed: the first alternative's, then the others (brand mismatches
        summarised, since CUDA images list a dozen brands per driver branch)."""
        where = f" on GPU {self.device}" if self.device is not None else ""
        if self.invalid:
            return f"{self.source}{where}: invalid expression: {self.invalid}"
        if self.ok:
            return f"{self.source}{where}: satisfied by {self.matched!r}"
        fails = self.failed_conditions()
        rest = fails[1:]
        other = [(a, c) for a, c in rest if not c.text.lower().startswith("brand")]
        brand = [c for _, c in rest if c.text.lower().startswith("brand")]
        parts = [f"{alt!r} fails on {c.describe()}" for alt, c in fails[:1] + other[:limit]]
        if len(other) > limit:
            parts.append(f"{len(other) - limit} more alternative(s) fail likewise")
        if brand:
            names = sorted({c.text.split("=", 1)[1].lower() for c in brand})
            parts.append(f"{len(brand)} alternative(s) are for other brands than this GPU's "
                         f"brand={brand[0].actual} ({', '.join(names)})")
        return f"{self.source}{where}: unsatisfied: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "device": self.device,
            "ok": self.ok,
            "matched": self.matched,
            "invalid": self.invalid,
            "latent_invalid": list(self.latent_invalid),
            "assumed": list(self.assumed),
            "failed": [
                {"alternative": alt, "condition": c.text, "host_value": c.actual,
                 "why": c.invalid or "not met"}
                for alt, c in self.failed_conditions()
            ],
            "nvidia_message": self.nvidia_message,
            "explanation": self.explain(),
        }


def evaluate_expression(
    expr: str, host: HostFacts, dev: DeviceFacts | None, *, source: str = "requirement"
) -> RequirementResult:
    """Evaluate one expression the way libnvidia-container's ``dsl_evaluate`` does.

    Alternatives are tried left to right, conditions within one left to right, each stopping
    at the first false condition; the first alternative whose conditions all hold satisfies
    the expression. An invalid condition that evaluation reaches fails the whole expression.
    """
    alts = split_expression(expr)
    checked = tuple(
        (",".join(a), tuple(check_condition(c, host, dev) for c in a)) for a in alts
    )
    ok, matched, invalid, reached = not alts, None, None, 0
    for alt_text, conds in checked:
        reached += 1
        bad = next((c for c in conds if c.invalid or not c.ok), None)
        if bad is not None and bad.invalid:
            invalid = bad.invalid
            break
        if bad is None:
            ok, matched = True, alt_text
            break
    latent = [c.invalid for _, conds in checked for c in conds if c.invalid]
    if invalid is not None:
        latent.remove(invalid)  # the one evaluation reached is reported as ``invalid``
    assumed = tuple(sorted({c.text for _, conds in checked[:reached] for c in conds if c.assumed}))
    return RequirementResult(
        source=source, expression=expr, device=dev.index if dev else None,
        ok=ok and invalid is None, matched=matched, alternatives=checked,
        invalid=invalid, latent_invalid=tuple(latent), assumed=assumed,
    )


@dataclass(frozen=True)
class ImageRequirements:
    """The requirements an image's environment declares, as the NVIDIA runtime hook reads them."""

    #: (variable, expression), NVIDIA_REQUIRE_* sorted by name, then the legacy CUDA_VERSION one
    requirements: tuple[tuple[str, str], ...]
    disabled: bool = False
    disable_value: str | None = None
    #: CUDA_VERSION alone (no NVIDIA_REQUIRE_CUDA) gave ``cuda>=MAJOR.MINOR``
    legacy: bool = False
    #: problems that make the NVIDIA hook refuse the container outright
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "requirements": [{"source": s, "expression": e} for s, e in self.requirements],
            "disabled": self.disabled,
            "disable_value": self.disable_value,
            "legacy": self.legacy,
            "errors": list(self.errors),
        }


_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_BOOL = _TRUE | {"0", "f", "F", "FALSE", "false", "False"}


def _legacy_major_minor(version: str) -> str | None:
    """CUDA_VERSION -> "MAJOR.MINOR" as the toolkit's semver parse does (``v`` prefix allowed)."""
    m = re.fullmatch(
        r"v?(0|[1-9]\d*)(?:\.(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?)?"
        r"(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?",
        version,
    )
    if m is None:
        return None
    return f"{m.group(1)}.{m.group(2) or '0'}"


def requirements_from_env(env: Mapping[str, str]) -> ImageRequirements:
    """NVIDIA_REQUIRE_* (but not NVIDIA_REQUIRE_JETPACK*), legacy CUDA_VERSION, the disable flag."""
    disable_value = env.get("NVIDIA_DISABLE_REQUIRE")
    reqs = [
        (k, v) for k, v in sorted(env.items())
        if k.startswith("NVIDIA_REQUIRE_") and not k.startswith("NVIDIA_REQUIRE_JETPACK")
    ]
    errors: list[str] = []
    legacy = bool(env.get("CUDA_VERSION")) and not env.get("NVIDIA_REQUIRE_CUDA")
    if legacy:
        mm = _legacy_major_minor(env["CUDA_VERSION"])
        if mm is None:
            errors.append(
                f"CUDA_VERSION={env['CUDA_VERSION']!r} is not a version the NVIDIA runtime "
                "hook can parse (it refuses the container: failed to get version)"
            )
        else:
            reqs.append(("CUDA_VERSION (legacy)", f"cuda>={mm}"))
    return ImageRequirements(
        requirements=tuple(reqs),
        disabled=disable_value in _TRUE,
        disable_value=disable_value,
        legacy=legacy,
        errors=tuple(errors),
    )


@dataclass(frozen=True)
class RequirementsVerdict:
    declared: ImageRequirements
    results: tuple[RequirementResult, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Every requirement holds (whether or not the runtime enforces them)."""
        return not self.declared.errors and all(r.ok for r in self.results)

    @property
    def accepted(self) -> bool:
        """The NVIDIA runtime hook would start the container (disabled checks always pass)."""
        return self.declared.disabled or self.ok

    def failures(self) -> list[RequirementResult]:
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "accepted": self.accepted,
            "declared": self.declared.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "notes": list(self.notes),
        }


def evaluate_requirements(declared: ImageRequirements, host: HostFacts) -> RequirementsVerdict:
    """Every requirement against every visible device (or once without one), all must hold.

    NVIDIA_DISABLE_REQUIRE does not stop servelab from evaluating: the verdict is reported,
    and the caller says that the runtime will not enforce it.
    """
    devices: Sequence[DeviceFacts | None] = host.devices or (None,)
    results = tuple(
        evaluate_expression(expr, host, dev, source=src)
        for dev in devices
        for src, expr in declared.requirements
    )
    notes = _legacy_brand_notes(declared, host, results)
    return RequirementsVerdict(declared, results, tuple(notes))


def _legacy_brand_notes(
    declared: ImageRequirements, host: HostFacts, results: Sequence[RequirementResult]
) -> list[str]:
    notes = []
    for dev in host.devices:
        old = legacy_brand_key(dev.brand)
        if old == dev.brand:
            continue
        legacy_dev = replace(dev, brand=old)
        for src, expr in declared.requirements:
            now = next(r for r in results if r.device == dev.index and r.source == src)
            then = evaluate_expression(expr, host, legacy_dev, source=src)
            if now.ok != then.ok:
                notes.append(
                    f"{src} on GPU {dev.index}: {'satisfied' if now.ok else 'unsatisfied'} with "
                    f"brand={dev.brand}, but {'satisfied' if then.ok else 'unsatisfied'} with an "
                    f"older libnvidia-container that reports this GPU as brand={old}"
                )
    return notes


def parse_env_text(text: str, *, source: str = "env file") -> dict[str, str]:
    """An image's environment from ``KEY=VALUE`` lines, or ``docker image inspect`` JSON.

    ``#`` comment lines and blank lines are skipped; values are taken literally (no quotes
    removed), as the container runtime sees them.
    """
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        return _env_from_inspect(stripped, source)
    env: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key or key != key.strip():
            raise InputError(
                f"not a KEY=VALUE line: {line[:80]!r}", file=source, line=n,
                hint="write one KEY=VALUE per line, e.g. from "
                "docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' IMAGE",
            )
        env[key] = value
    return env


def _env_from_inspect(text: str, source: str) -> dict[str, str]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", file=source, line=e.lineno) from e
    if isinstance(doc, list):
        doc = doc[0] if doc else {}
    items: Any = None
    if isinstance(doc, dict):
        cfg = doc.get("Config") or doc.get("config") or {}
        items = cfg.get("Env") if isinstance(cfg, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise InputError(
            "JSON without a Config.Env list of strings", file=source,
            hint="give the output of docker image inspect IMAGE, or KEY=VALUE lines",
        )
    return dict(i.split("=", 1) if "=" in i else (i, "") for i in items)


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
            m = re.fullmatch(r"cuda>=(\d+(?:\.\d+)*)", c, flags=re.IGNORECASE)
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
# Findings
# --------------------------------------------------------------------------------------------

RULES: dict[str, Rule] = {r.id: r for r in (
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
         "no result.", "run python -m servelab.gpu_probe_py by hand to see why"),
)}


def finding(rule_id: str, message: str, *, severity: Severity | None = None,
            context: Mapping[str, str] | None = None) -> Finding:
    """A finding of one of :data:`RULES` (its default severity unless *severity* is given)."""
    rule = RULES[rule_id]
    return Finding(rule_id, severity or rule.severity, message, fix=rule.fix or None,
                   source="servelab gpu", context=dict(context or {}))


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


# --------------------------------------------------------------------------------------------
# The Python probe (servelab.gpu_probe_py) and its JSON
# --------------------------------------------------------------------------------------------


def probe_script_text() -> str:
    """The source of the standalone probe, to run with any Python (e.g. inside a container)."""
    from importlib import resources

    return resources.files("servelab").joinpath("gpu_probe_py.py").read_text(encoding="utf-8")


def parse_probe_output(stdout: str) -> dict[str, Any]:
    """The probe's JSON document: the last stdout line that is a JSON object."""
    for raw in reversed(stdout.strip().splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict) and str(doc.get("schema", "")).startswith(
                "servelab.gpu-probe-py/"
            ):
                return doc
    raise InputError("the Python GPU probe printed no result JSON",
                     hint="run python -m servelab.gpu_probe_py by hand to see what it prints")


def assess_probe(probe: Mapping[str, Any], host: HostGpuInfo) -> list[Finding]:
    """Findings from the probe's JSON: torch present, CUDA initialised, arch list, matmul."""
    if probe.get("status") == "error":
        sev = None if host.available else Severity.WARNING
        return [finding("gpu-probe-failed", f"the Python probe failed: {probe.get('error')}",
                        severity=sev)]
    torch = probe.get("torch") or {}
    if not torch.get("importable"):
        why = torch.get("error") or "not installed"
        return [finding("gpu-torch-missing", f"torch is not importable ({why}): CUDA "
                        "initialisation, arch list and matmul were not checked")]
    if not torch.get("cuda_available"):
        if not host.available:
            return []
        return [finding("gpu-torch-cuda-unavailable", f"torch {torch.get('version')} (CUDA "
                        f"{torch.get('cuda_version')}) cannot use the GPU: "
                        f"{torch.get('cuda_error') or 'torch.cuda.is_available() is False'}")]
    out: list[Finding] = []
    for dev in torch.get("devices") or []:
        out += _device_findings(dev)
    return out


def _device_findings(dev: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    idx = str(dev.get("index"))
    cover = dev.get("arch_coverage") or {}
    kind = cover.get("kind")
    if kind == "none":
        out.append(finding("gpu-arch-not-covered", f"GPU {idx} ({dev.get('name')}, "
                           f"{dev.get('sm')}) is not in torch's arch list {cover.get('arch_list')}",
                           context={"gpu": idx}))
    elif kind == "ptx":
        out.append(finding("gpu-arch-ptx-only", f"GPU {idx} ({dev.get('sm')}) only via PTX "
                           f"{cover.get('via')}", context={"gpu": idx}))
    mm = dev.get("matmul") or {}
    if mm and not mm.get("ok"):
        out.append(finding("gpu-matmul-failed", f"GPU {idx}: {mm.get('error') or 'wrong result'}",
                           context={"gpu": idx}))
    return out


def run_python_probe(
    python: str, *, matmul: bool = True, timeout: float = 180.0
) -> dict[str, Any]:
    """Run the probe with *python* (script on stdin, as inside a container) and parse its JSON.

    A probe that crashes, hangs or prints no JSON gives ``{"status": "error", "error": ...}``.
    """
    argv = [python, "-", *([] if matmul else ["--no-matmul"])]
    try:
        res = proc.run(argv, input_text=probe_script_text(), timeout=timeout, check=False)
    except CommandError as e:
        return {"status": "error", "error": e.message.splitlines()[0]}
    if res.returncode != 0:
        tail = " | ".join(ln for ln in res.stderr.strip().splitlines()[-3:])
        return {"status": "error", "error": f"exit code {res.returncode}: {tail[:400]}"}
    try:
        return parse_probe_output(res.stdout)
    except InputError as e:
        return {"status": "error", "error": e.message}


@dataclass(frozen=True)
class GpuProbeReport:
    """What ``servelab gpu-probe`` found: host, Python probe, and an image's requirements."""

    host: HostGpuInfo
    probe: dict[str, Any] | None
    image: ImageGpuAssessment | None
    findings: tuple[Finding, ...]
    gpu_required: bool = False

    @property
    def status(self) -> str:
        """``unavailable`` (no GPU), ``failed`` (an error finding) or ``ok``."""
        if not self.host.available:
            return "unavailable"
        if any(f.severity is Severity.ERROR for f in self.findings):
            return "failed"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "gpu_required": self.gpu_required,
            "host": self.host.to_dict(),
            "python_probe": self.probe,
            "image": self.image.to_dict() if self.image else None,
            "findings": [f.to_dict() for f in self.findings],
        }


def _extra_requirements(exprs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    for e in exprs:
        parse_expression(e)  # a typo on the command line is bad input (exit 2), not a finding
    return tuple((f"--require #{n}", e) for n, e in enumerate(exprs, 1))


def probe_host(
    *, python: str | None, env: Mapping[str, str] | None = None, requires: Sequence[str] = (),
    cdi: bool = False, gpu_required: bool = False, matmul: bool = True,
    probe_timeout: float = 180.0, smi_timeout: float = SMI_TIMEOUT,
) -> GpuProbeReport:
    """``servelab gpu-probe``: nvidia-smi, the Python probe with *python* (None: skip it), and
    an image's requirements (*env* and/or *requires*) against this host."""
    extra = _extra_requirements(requires)  # bad input fails before anything runs
    host = host_gpus(timeout=smi_timeout)
    found: list[Finding] = []
    if not host.available:
        found.append(finding("gpu-unavailable", f"GPU unavailable: {host.reason}",
                             severity=Severity.ERROR if gpu_required else None))
    image = None
    if env is not None or extra:
        image = assess_image(env or {}, host, cdi=cdi, gpu_required=gpu_required, extra=extra)
        found += [f for f in image.findings if f.rule_id != "gpu-unavailable"]
    probe = run_python_probe(python, matmul=matmul, timeout=probe_timeout) if python else None
    if probe is not None:
        found += assess_probe(probe, host)
    return GpuProbeReport(host, probe, image, tuple(found), gpu_required)
