"""What each stage of one repeat hands the runner: typed outcomes, one class per stage.

:class:`StageOutcome` is what every stage has (status, reason, seconds, the stage's JSON record,
verdicts, files); :class:`BuildOutcome`, :class:`ScanOutcome` and :class:`SmokeOutcome` add
what the stage learnt for the rest of the result (the build record, finding counts, Trivy
facts, start-up and latency metrics, the host's GPUs). A later stage reads an earlier one's
outcome from these objects, never from the result dict. :class:`RepeatResult` holds the four
outcomes of one repeat of one arm; :func:`servelab.run.results.assemble` turns it into
``result.json`` in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servelab.build.stage import BuildRecord
    from servelab.node import NodeStart
    from servelab.smoke.gpuphases import GpuPhases
    from servelab.smoke.modelload import ModelLoad
    from servelab.spec import Arm

@dataclass(frozen=True)
class Verdict:
    """One check of one repeat: passed True/False, or None when it was not tested (with why)."""

    check: str
    stage: str
    passed: bool | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "stage": self.stage, "passed": self.passed,
                "reason": self.reason}


@dataclass
class StageOutcome:
    """What one stage of one repeat produced; a stage that did not run is ``skipped``."""

    status: str  # ok, failed, skipped, error
    reason: str = ""
    seconds: float | None = None
    #: the stage's record in result.json (``stages.<name>.record``): written, never read back
    record: dict[str, Any] | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "seconds": self.seconds,
                "record": self.record}


@dataclass
class BuildOutcome(StageOutcome):
    """The build of one repeat: the :class:`~servelab.build.stage.BuildRecord` when it built."""

    build: BuildRecord | None = None

    @property
    def tested_ref(self) -> str | None:
        """What the later stages test: ``name@sha256:...`` of the loaded image."""
        if self.build is None:
            return None
        return self.build.tested_ref() or self.build.image_ref


@dataclass(frozen=True)
class TrivyFacts:
    """Which scanner and DB judged the image (``environment.trivy``)."""

    version: str
    db_updated_at: str | None
    db_path: str | None
    db_repository: str | None
    offline: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScanOutcome(StageOutcome):
    """The scan of one repeat: findings by severity and the scanner's facts."""

    findings: dict[str, int] | None = None
    trivy: TrivyFacts | None = None


@dataclass(frozen=True)
class StartupMetrics:
    """Seconds from container start (``metrics.startup``)."""

    first_accept_s: float | None
    ready_s: float | None
    first_request_s: float | None
    created_to_started_s: float | None
    first_start: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LatencyMetrics:
    """The representative request's latency (``metrics.latency``)."""

    p50_ms: float | None
    p95_ms: float | None
    count: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HostGpus:
    """The machine's GPU facts as the smoke stage saw them (``host``, read by k8s-check)."""

    gpus: list[dict[str, Any]]
    cuda_driver_version: str | None
    gpu_state: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "cuda_driver_version": self.cuda_driver_version,
                "gpu_state": self.gpu_state}


@dataclass
class SmokeOutcome(StageOutcome):
    """The smoke test of one repeat: start-up and latency, the mounted model, the GPUs."""

    startup: StartupMetrics | None = None
    latency: LatencyMetrics | None = None
    model_sha256: str | None = None
    host: HostGpus | None = None
    #: the pulls before the start, as a node pays them (``metrics.coldstart``)
    node: NodeStart | None = None
    #: what the server read before ready (``metrics.model_load``)
    model_load: ModelLoad | None = None
    #: CUDA init, first kernel, GPU memory after ready and after cleanup (``metrics.gpu``)
    gpu_phases: GpuPhases | None = None


@dataclass(frozen=True)
class Inputs:
    """Hashes of what went into one arm (``inputs``), computed once per arm and run."""

    build_args: dict[str, str]
    git_ref: str | None
    commit: str | None = None
    dockerfile_sha256: str | None = None
    context_sha256: str | None = None
    model_sha256: str | None = None
    request_sha256: str | None = None


@dataclass
class RepeatResult:
    """The outcomes of one repeat of one arm; ``lint`` is None when lint was not selected."""

    arm: Arm
    repeat: int
    build: BuildOutcome
    scan: ScanOutcome
    smoke: SmokeOutcome
    lint: StageOutcome | None = None

    @property
    def image_ref(self) -> str | None:
        """The image the repeat tested: the one it built, else the arm's prebuilt image."""
        return self.build.tested_ref or self.arm.image

    def stages(self) -> list[tuple[str, StageOutcome]]:
        """(name, outcome) in run order."""
        found: list[tuple[str, StageOutcome | None]] = [
            ("lint", self.lint), ("build", self.build), ("scan", self.scan),
            ("smoke", self.smoke)]
        return [(name, o) for name, o in found if o is not None]
