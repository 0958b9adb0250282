"""Aggregate per-repeat results into per-arm statistics, deltas and a verdict.

Works on result.json dicts (what the run writes and what ``servelab report`` reads back), so
the same code judges a fresh run and merged artifacts from several machines.

Each judged metric's difference gets an interval (:mod:`servelab.run.intervals`: the
Hodges–Lehmann shift with its exact Mann–Whitney interval). It counts as changed only when the
whole interval lies beyond the metric's threshold: its minimum effect, raised to the runner's
noise (a calibration file's figure, else half the larger min–max spread of the arms); a metric
whose interval spans the threshold reads "inconclusive" and no verdict rests on it. When
something improves while something else gets worse, the verdict is "trade-off", never
"improved".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from servelab.run import intervals

SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN")


def fmt(value: float | None, unit: str) -> str:
    """A figure with its unit, as the summaries show it (``–`` when missing)."""
    if value is None:
        return "–"
    if unit == "bytes":
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= size:
                return f"{value / size:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.1f} ms"
    return f"{value:g}"


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _findings_total(r: dict[str, Any]) -> float | None:
    f = _get(r, "metrics", "findings")
    return float(sum(int(f.get(s, 0)) for s in SEVERITIES)) if isinstance(f, dict) else None


@dataclass(frozen=True)
class MetricDef:
    key: str
    label: str
    unit: str
    spec_metric: str  # which spec metric asks for it
    extract: Callable[[dict[str, Any]], Any]
    min_effect: float
    #: "core" (the control-vs-treatment table) or "node" (the start-up cost on a node)
    group: str = "core"


def _cs(*keys: str) -> Callable[[dict[str, Any]], Any]:
    """An extractor of ``metrics.coldstart.<keys...>``."""
    return lambda r: _get(r, "metrics", "coldstart", *keys)


def _read_before_ready(r: dict[str, Any]) -> Any:
    """What the untimed start read of the unpacked image before ready, when measured."""
    rb = _get(r, "metrics", "coldstart", "read_before_ready") or {}
    return rb.get("read_bytes") if isinstance(rb, dict) and rb.get("measured") else None


def _cold(*keys: str) -> Callable[[dict[str, Any]], Any]:
    """An extractor of ``metrics.coldstart.cold.<keys...>``: None when the pull's own check
    says it was not cold (a warm figure is never counted as cold)."""
    def get(r: dict[str, Any]) -> Any:
        if _get(r, "metrics", "coldstart", "cold", "cold_check", "cold") is False:
            return None
        return _get(r, "metrics", "coldstart", "cold", *keys)
    return get


def _lazy(*keys: str) -> Callable[[dict[str, Any]], Any]:
    """An extractor of ``metrics.coldstart.lazy.<keys...>``: None unless the repeat's lazy
    pull really was lazy (a silent fallback to a full pull, or a pull not measured, is never
    counted in a lazy figure)."""
    def get(r: dict[str, Any]) -> Any:
        if _get(r, "metrics", "coldstart", "lazy", "lazy") is not True:
            return None
        return _get(r, "metrics", "coldstart", "lazy", *keys)
    return get


def _lazy_to(key: str) -> Callable[[dict[str, Any]], Any]:
    """``metrics.coldstart.<key>.lazy`` (pull to ready or first request on the lazy node),
    only from a repeat whose pull was lazy."""
    def get(r: dict[str, Any]) -> Any:
        if _get(r, "metrics", "coldstart", "lazy", "lazy") is not True:
            return None
        return _get(r, "metrics", "coldstart", key, "lazy")
    return get


#: lower is better for every numeric metric servelab reports
NUMERIC: tuple[MetricDef, ...] = (
    MetricDef("size", "compressed size", "bytes", "size",
              lambda r: _get(r, "metrics", "size", "compressed_bytes"), 4096.0),
    MetricDef("startup", "start to ready (health 2xx)", "s", "startup",
              lambda r: _get(r, "metrics", "startup", "ready_s"), 0.05),
    MetricDef("first_request", "start to first good request", "s", "startup",
              lambda r: _get(r, "metrics", "startup", "first_request_s"), 0.05),
    MetricDef("latency_p50", "request latency p50", "ms", "latency",
              lambda r: _get(r, "metrics", "latency", "p50_ms"), 1.0),
    MetricDef("latency_p95", "request latency p95", "ms", "latency",
              lambda r: _get(r, "metrics", "latency", "p95_ms"), 2.0),
    MetricDef("findings", "vulnerability findings", "findings", "findings",
              _findings_total, 0.0),
    MetricDef("pulled_warm_base", "bytes pulled, node holding the base", "bytes", "size",
              lambda r: _holding(r, "base", _cs("warm_base", "bytes_pulled")(r)), 4096.0,
              "node"),
    MetricDef("node_ready_warm_base", "node: pull to ready, base held", "s", "startup",
              _cs("to_ready_s", "warm_base"), 0.05, "node"),
    MetricDef("node_ready_cold", "node: pull to ready, cold", "s", "startup",
              _cs("to_ready_s", "cold"), 0.05, "node"),
)

#: figures reported beside the judged metrics (summary, compare), never judged: loopback
#: seconds of single phases, and bytes whose better/worse depends on the change
REPORTED: tuple[MetricDef, ...] = (
    MetricDef("pulled_cold", "bytes pulled, cold node", "bytes", "size",
              _cold("bytes_pulled"), 4096.0, "node"),
    MetricDef("pull_cold_s", "pull, cold", "s", "startup", _cold("pull_s"), 0.05, "node"),
    MetricDef("unpack_cold_s", "unpack, cold", "s", "startup", _cold("unpack_s"), 0.05,
              "node"),
    MetricDef("cpu_cold_s", "runtime CPU, cold pull", "s", "startup", _cold("runtime_cpu_s"),
              0.05, "node"),
    MetricDef("pull_warm_base_s", "pull, base held", "s", "startup",
              _cs("warm_base", "pull_s"), 0.05, "node"),
    MetricDef("unpack_warm_base_s", "unpack, base held", "s", "startup",
              _cs("warm_base", "unpack_s"), 0.05, "node"),
    MetricDef("pulled_holding_control", "bytes pulled, node holding the control", "bytes",
              "size", lambda r: _holding(r, "control"), 4096.0, "node"),
    MetricDef("model_bytes_read", "model bytes read before ready", "bytes", "startup",
              lambda r: _get(r, "metrics", "model_load", "bytes_read"), 4096.0, "node"),
    MetricDef("image_bytes_read", "image bytes read before ready (full pull)", "bytes",
              "startup", _read_before_ready, 4096.0, "node"),
    MetricDef("pull_lazy_s", "pull, lazy", "s", "startup", _lazy("pull_s"), 0.05, "node"),
    MetricDef("node_ready_lazy", "node: pull to ready, lazy", "s", "startup",
              _lazy_to("to_ready_s"), 0.05, "node"),
    MetricDef("node_first_request_lazy", "node: pull to first good request, lazy", "s",
              "startup", _lazy_to("to_first_request_s"), 0.05, "node"),
    MetricDef("fetched_lazy", "bytes fetched, lazy node", "bytes", "size",
              _lazy("bytes_fetched", "total"), 4096.0, "node"),
    MetricDef("read_lazy", "bytes read lazily (FUSE, on demand)", "bytes", "size",
              _lazy("bytes_read", "synchronous_bytes_served"), 4096.0, "node"),
    MetricDef("cuda_init_s", "CUDA init (probe)", "s", "startup",
              lambda r: _get(r, "metrics", "gpu", "cuda_init_s"), 0.05, "gpu"),
    MetricDef("first_kernel_s", "first kernel (probe)", "s", "startup",
              lambda r: _get(r, "metrics", "gpu", "first_kernel_s"), 0.05, "gpu"),
)
ALL_METRICS: tuple[MetricDef, ...] = NUMERIC + REPORTED


def _holding(r: dict[str, Any], holds: str, default: Any = None) -> Any:
    """The exact bytes a node holding *holds* pulls (``node_holds``), else *default*."""
    for c in _get(r, "metrics", "coldstart", "node_holds") or []:
        if isinstance(c, dict) and c.get("holds") == holds and c.get("bytes") is not None:
            return c.get("bytes")
    return default


@dataclass
class Stat:
    values: list[float]
    median: float
    min: float
    max: float

    @property
    def spread(self) -> float:
        return self.max - self.min


def stat(values: Iterable[Any]) -> Stat | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return None
    return Stat(vals, statistics.median(vals), min(vals), max(vals))


@dataclass
class ArmStats:
    arm: str
    repeats: int
    digests: list[str | None]
    metrics: dict[str, Stat]
    failed_checks: list[str]

    @property
    def reproducible(self) -> bool | None:
        if not self.digests or all(d is None for d in self.digests):
            return None
        return None not in self.digests and len(set(self.digests)) == 1


def arm_stats(arm: str, results: list[dict[str, Any]]) -> ArmStats:
    metrics: dict[str, Stat] = {}
    for m in ALL_METRICS:
        s = stat(m.extract(r) for r in results)
        if s is not None:
            metrics[m.key] = s
    failed: list[str] = []
    for r in results:
        for v in r.get("verdicts", []):
            if v.get("passed") is False and v["check"] not in failed:
                failed.append(v["check"])
    return ArmStats(arm, len(results), [_get(r, "image", "digest") for r in results],
                    metrics, failed)


@dataclass
class Delta:
    metric: str
    label: str
    unit: str
    control: float
    treatment: float
    delta: float
    threshold: float
    changed: bool
    direction: str | None  # "better", "worse" or None
    #: the shift's interval (treatment − control) and its exact coverage
    interval: intervals.Interval | None = None
    #: better, worse, no detectable change or inconclusive (the interval spans the threshold)
    reading: str = "no detectable change"
    #: the smallest change this run could have detected (threshold + the interval's half-width)
    detectable: float | None = None
    #: where the threshold's noise part came from: "calibration", "spread" or "min effect"
    threshold_from: str = "min effect"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"] = None if self.interval is None else {
            "estimate": self.interval.estimate, "low": self.interval.low,
            "high": self.interval.high, "coverage": self.interval.coverage}
        return out


#: units whose figures are exact counts (bytes from manifests, findings), not timings
EXACT_UNITS = ("bytes", "findings")


def _threshold(m: MetricDef, c: Stat, t: Stat, effect: float,
               calibration: Mapping[str, float] | None) -> tuple[float, str]:
    """The metric's threshold and what set it: a calibration file's noise figure, else half the
    larger min–max spread of this run's arms, never below the minimum effect."""
    if calibration is not None and m.key in calibration:
        noise, source = float(calibration[m.key]), "calibration"
    else:
        noise, source = max(c.spread, t.spread) / 2, "spread"
    return (noise, source) if noise > effect else (effect, "min effect")


def _delta(m: MetricDef, c: Stat, t: Stat, effect: float,
           calibration: Mapping[str, float] | None) -> Delta:
    threshold, source = _threshold(m, c, t, effect, calibration)
    iv = intervals.shift_interval(c.values, t.values)
    reading = intervals.reading(iv, threshold)
    if (reading in ("better", "worse") and m.unit not in EXACT_UNITS
            and iv.coverage < intervals.MIN_COVERAGE):
        reading = "inconclusive"  # one repeat an arm: a timing's difference has no interval
    changed = reading in ("better", "worse")
    return Delta(m.key, m.label, m.unit, c.median, t.median, t.median - c.median, threshold,
                 changed, reading if changed else None, iv, reading,
                 intervals.detectable(iv, threshold), source)


def compare_arms(
    control: ArmStats, treatment: ArmStats, min_effect: dict[str, float] | None = None,
    calibration: Mapping[str, float] | None = None,
) -> list[Delta]:
    """Every judged metric's difference, interval and reading; *calibration* maps a metric to
    the noise threshold a calibration file measured for it."""
    out: list[Delta] = []
    for m in NUMERIC:
        c, t = control.metrics.get(m.key), treatment.metrics.get(m.key)
        if c is None or t is None:
            continue
        effect = (min_effect or {}).get(m.key, (min_effect or {}).get(m.spec_metric, m.min_effect))
        out.append(_delta(m, c, t, effect, calibration))
    return out


@dataclass
class Verdict:
    verdict: str
    reasons: list[str] = field(default_factory=list)
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _reproducibility_change(control: ArmStats, treatment: ArmStats) -> str | None:
    c, t = control.reproducible, treatment.reproducible
    if c is False and t is True:
        return "better"
    if c is True and t is False:
        return "worse"
    return None


def judge(
    control: ArmStats | None,
    treatment: ArmStats,
    deltas: list[Delta],
    gate_failures: list[str],
    invalid: list[str],
) -> Verdict:
    """The experiment's verdict. Invalid beats failed beats the comparison."""
    if invalid:
        return Verdict("invalid", invalid, 2)
    if gate_failures:
        verdict = "not reproducible" if treatment.reproducible is False else "failed"
        return Verdict(verdict, gate_failures, 1)
    if control is None:
        return Verdict("passed", ["no control arm: the treatment passed every gate"], 0)
    better = [d.label for d in deltas if d.direction == "better"]
    worse = [d.label for d in deltas if d.direction == "worse"]
    fixed_checks = [c for c in control.failed_checks if c not in treatment.failed_checks]
    if fixed_checks:
        better.append("checks now passing: " + ", ".join(fixed_checks))
    rep = _reproducibility_change(control, treatment)
    if rep == "better":
        better.insert(0, "reproducible digest")
    elif rep == "worse":
        worse.insert(0, "reproducible digest")
    if better and worse:
        return Verdict("trade-off", [f"better: {', '.join(better)}", f"worse: {', '.join(worse)}"])
    if better:
        return Verdict("improved", [f"better: {', '.join(better)}"])
    if worse:
        return Verdict("regressed", [f"worse: {', '.join(worse)}"])
    return Verdict("no detectable change", _no_change_reasons(deltas))


def _no_change_reasons(deltas: list[Delta]) -> list[str]:
    """Why nothing changed: what could have been seen, and the metrics that were inconclusive."""
    out = ["no metric's interval cleared its threshold"]
    unsure = [d.label for d in deltas if d.reading == "inconclusive"]
    if unsure:
        out.append("inconclusive (the interval spans the threshold): " + ", ".join(unsure))
    seen = [f"{d.label} {fmt(d.detectable, d.unit)}" for d in deltas
            if d.detectable is not None and d.detectable > 0]
    if seen:
        out.append("the smallest change this run could have detected: " + ", ".join(seen))
    return out


def comparison(deltas: list[Delta]) -> dict[str, Any]:
    """summary.json's ``comparison``: the interval method and every judged metric's Δ."""
    return {"method": intervals.METHOD, "metrics": [d.to_dict() for d in deltas]}


#: summary.json's headline figures of the treatment (the action's outputs read them)
HEADLINE = {
    "pulled_bytes_cold": "pulled_cold",
    "pulled_bytes_warm_base": "pulled_warm_base",
    "node_ready_cold_s": "node_ready_cold",
    "node_ready_warm_base_s": "node_ready_warm_base",
    "model_bytes_read": "model_bytes_read",
}


def headline(treatment: ArmStats, control: ArmStats | None) -> dict[str, Any]:
    """The treatment's medians of the start-up cost on a node (None when not measured), and
    every arm's medians of the node figures under ``coldstart``."""
    def medians(a: ArmStats) -> dict[str, float | None]:
        return {m.key: (a.metrics[m.key].median if m.key in a.metrics else None)
                for m in ALL_METRICS if m.group == "node"}

    t = medians(treatment)
    out: dict[str, Any] = {k: t.get(key) for k, key in HEADLINE.items()}
    for k in ("pulled_bytes_cold", "pulled_bytes_warm_base", "model_bytes_read"):
        out[k] = int(out[k]) if out[k] is not None else None
    out["coldstart"] = {a.arm: medians(a) for a in (control, treatment) if a is not None}
    return out
