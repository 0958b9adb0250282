"""NVIDIA_REQUIRE_*: libnvidia-container's requirement language and its evaluation.

Parsing and evaluating expressions such as ``cuda>=12.4 brand=tesla,driver>=470,driver<471``
against host facts, the requirements an image's environment declares, and reading that
environment from ``KEY=VALUE`` lines or ``docker image inspect`` JSON (see docs/gpu.md for
the exact semantics). Pure functions and small dataclasses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from servelab.errors import InputError
from servelab.textio import loads_json

REQUIRE_KEYS = ("cuda", "driver", "arch", "brand")
#: libnvidia-container's operator table; the whole run of operator characters must match one.
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_OP_CHARS = "<>=!"
_VERSION = re.compile(r"\d{1,9}(?:\.+\d{1,9})*\.*", re.ASCII)  # ASCII digits, int-sized

#: The brands older libnvidia-container releases know; they report every other one as "unknown".
LEGACY_BRANDS = frozenset({"quadro", "tesla", "nvs", "grid", "geforce", "titan"})


def legacy_brand_key(key: str | None) -> str | None:
    """The brand older libnvidia-container releases report: the six classic ones, else unknown."""
    if key is None:
        return None
    return key if key in LEGACY_BRANDS else "unknown"


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
        version, flags=re.ASCII,
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
    doc = loads_json(text, source, hint="give the output of docker image inspect IMAGE")
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

