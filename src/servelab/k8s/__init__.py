"""Pre-launch checks of the Kubernetes manifests of a GPU inference service.

``check_manifests(paths, result_paths=...)`` reads the manifests (and, optionally, what an
experiment measured) and returns a :class:`~servelab.findings.FindingsReport`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from servelab.errors import UsageError
from servelab.findings import CoverageNote, Finding, FindingsReport, Rule
from servelab.k8s import rules as _rules  # noqa: F401 (registers every rule)
from servelab.k8s.checks import CHECKS, RULES, Context
from servelab.k8s.load import expand_paths, load_inventory, unread_refs
from servelab.k8s.measured import Measured, read_measured
from servelab.k8s.model import Inventory, Workload
from servelab.k8s.rules.gpu import shm_oversized
from servelab.k8s.rules.secrets import committed_secrets, configmap_secrets, secret_literals

if TYPE_CHECKING:
    from servelab.k8s.imagefiles import ImageFiles

__all__ = ["RULES", "RULE_ORDER", "SERVING_RULES", "TOOL", "all_rules", "check_manifests"]

TOOL = "servelab k8s-check"

#: The rule ids in the order the documentation lists them.
RULE_ORDER = (
    "image-not-digest", "image-digest-mismatch", "image-provenance", "gpu-limit",
    "gpu-visibility", "gpu-toleration", "gpu-placement", "startup-probe-budget", "probe-target",
    "security-context", "host-path", "plaintext-secret", "model-mount", "start-install",
    "resources", "shm", "driver-compat", "disruption", "priority", "rollout", "service-port",
)
#: The rules about serving a model on GPUs (the ones whose precision docs/k8s-check.md states).
SERVING_RULES = frozenset({
    "gpu-limit", "gpu-toleration", "gpu-placement", "driver-compat", "shm",
    "startup-probe-budget", "probe-target", "model-mount", "start-install",
})


def all_rules() -> dict[str, Rule]:
    """Every rule id k8s-check can report, in documentation order."""
    return {rid: RULES[rid] for rid in sorted(RULES, key=_rank)}


def _rank(rule_id: str) -> int:
    return RULE_ORDER.index(rule_id) if rule_id in RULE_ORDER else len(RULE_ORDER)


#: The rules that also judge a CPU Ray head next to GPU workers: it runs the Serve proxy (the
#: HTTP entry of a RayService) and the GCS, so what it runs and how it is locked down matter.
HEAD_RULES = frozenset({"image-not-digest", "security-context", "host-path", "plaintext-secret"})
#: what is checked of an InferenceService's CPU transformer or explainer: the head's rules and
#: its readiness probe (it takes the predictor's traffic)
FRONT_RULES = HEAD_RULES | {"probe-target"}
RAY_CLUSTERS = ("RayService", "RayCluster")


def _targets(inv: Inventory) -> tuple[list[Workload], list[Workload]]:
    """(checked, skipped): the GPU workloads, or every workload when none requests a GPU. A
    runtime merged into the InferenceServices that use it is judged there, not alone."""
    alone = [w for w in inv.workloads if not w.merged_into]
    gpu = [w for w in alone if w.is_gpu]
    if not gpu:
        return alone, []
    return gpu, [w for w in alone if not w.is_gpu]


def _ray_heads(skipped: list[Workload]) -> list[Workload]:
    """The CPU heads of Ray clusters among the pods not checked as GPU servers."""
    return [w for w in skipped if w.part == "head" and w.kind in RAY_CLUSTERS]


#: the parts of an InferenceService in front of its predictor: they take its traffic
_FRONT_PARTS = ("transformer", "explainer")


def _fronts(skipped: list[Workload], checked: list[Workload]) -> list[Workload]:
    """The CPU transformers and explainers of InferenceServices whose predictor is checked."""
    served = {id(w.obj) for w in checked}
    return [w for w in skipped
            if id(w.obj) in served and (w.part or "").split(" ", 1)[0] in _FRONT_PARTS]


def _notes(inv: Inventory, skipped: list[Workload], measured: Measured | None,
           checked: list[Workload]) -> list[str]:
    notes: list[str] = []
    if not inv.workloads:
        kinds = sorted({o.kind for o in (*inv.secrets, *inv.configmaps, *inv.services,
                                         *inv.pdbs, *inv.priority_classes, *inv.hpas,
                                         *inv.ignored)})
        notes.append("no workload in the input (only " + ", ".join(kinds) + "): the checks that "
                     "apply to these objects ran (credentials in Secrets and ConfigMaps); pass "
                     "the workload's "
                     "manifests with them to check its pods")
    elif not any(w.is_gpu for w in checked):
        notes.append("no workload requests a GPU: every workload was checked as the GPU server")
    heads = _ray_heads(skipped)
    if heads:
        notes.append("checked for image pinning, security context and secrets only (a Ray head: "
                     "no GPU, but it runs the Serve proxy): " + ", ".join(w.ref for w in heads))
    fronts = _fronts(skipped, checked)
    if fronts:
        notes.append("checked for image pinning, security context, secrets and its readiness "
                     "probe only (in front of the GPU predictor, it takes the traffic): "
                     + ", ".join(w.ref for w in fronts))
    rest = [w for w in skipped if w not in heads and w not in fronts]
    if rest:
        notes.append("not checked (no GPU): " + ", ".join(w.ref for w in rest))
    if inv.unread:
        notes.append("not read (kinds k8s-check cannot read; their pods are not checked): "
                     + ", ".join(unread_refs(inv)))
    notes += [n for w in checked for n in w.inherited_notes()]
    notes += [f"{w.ref}: used by no InferenceService here, checked as a GPU server: it runs "
              f"{w.known_gpu_server} (a known GPU server, see 'Known GPU servers' in "
              "docs/k8s-check.md)" for w in checked if w.known_gpu_server and not w.gpu_users]
    notes += [f"{w.ref}: judged with each InferenceService that uses it, as KServe merges "
              f"them: {', '.join(w.merged_into)}" for w in inv.workloads if w.merged_into]
    if inv.duplicates:
        notes.append("defined more than once (the last one applied wins): "
                     + "; ".join(inv.duplicates))
    if inv.ignored:
        kinds = sorted({o.kind for o in inv.ignored})
        notes.append(f"ignored {len(inv.ignored)} object(s) of kinds not checked: "
                     + ", ".join(kinds))
    if measured is not None:
        notes.append(measured.summary())
        notes += measured.notes
    return notes


def _attach_image(image: str, workloads: list[Workload]) -> ImageFiles:
    """Give the checked image to the containers that run it (same digest, or same repository
    without a digest); when none names it, to every serving container. Its files (the note
    of what was read is the first of its notes; what its history could not tell is a
    coverage note)."""
    from servelab.k8s.imagefiles import as_list, read_image
    from servelab.k8s.provenance import read_history

    everyone = [c for w in workloads for c in (*w.init_containers, *w.containers)]
    words = [str(v) for c in everyone for key in ("command", "args")
             for v in as_list(c.data.get(key))]
    files = read_image(image, words)
    named = [c for c in everyone if files.names(str(c.data.get("image") or ""))]
    chosen = named or [w.serving for w in workloads]
    for c in chosen:
        c.image_files = files
    shown = ", ".join(sorted({c.name for c in chosen}))
    how = "" if named else (" (no container image names it by digest or repository: read as "
                            "the image of every serving container)")
    history = read_history(image)
    for c in chosen:
        c.image_history = history
    files.notes = [f"--image {files.name}: read {len(files.scripts)} shell script(s) from its "
                   f"layers (every blob verified) for container(s) {shown}{how}"]
    if history.no_history:
        files.notes.append(f"--image {files.name}: its config has no history: whether every "
                           "layer was built from an instruction is not checked")
    if history.mismatch:
        files.coverage.append(CoverageNote(f"--image {files.name}: the layers past its history",
                                           f"{history.mismatch}; they are not judged"))
    return files


def check_manifests(
    paths: Sequence[str | Path],
    *,
    result_paths: Sequence[str | Path] = (),
    startup_margin: float = 1.5,
    serving_container: str | None = None,
    image: str | None = None,
) -> FindingsReport:
    """Check the manifests in *paths* (files, directories, ``-`` for stdin); with *image*, the
    scripts the containers run are also read from that image's layers."""
    if not startup_margin >= 1.0:
        raise UsageError(f"startup margin {startup_margin} is below 1",
                         hint="use a factor of at least 1, e.g. --startup-margin 1.5")
    links: list[str] = []
    inv = load_inventory(expand_paths(paths, links), serving_container)
    measured = read_measured(result_paths)
    checked, skipped = _targets(inv)
    heads = _ray_heads(skipped)
    fronts = _fronts(skipped, checked)
    ctx = Context(inv, measured, startup_margin, [*checked, *heads, *fronts])
    for obj, key, path, value in secret_literals(inv.secrets):
        ctx.secret_literals.setdefault(value, []).append((obj, key, path))
    files = _attach_image(image, checked) if image is not None else None
    if files is not None:
        ctx.notes += files.notes
    workload_findings = [
        *(f for w in checked for _, check in CHECKS for f in check(w, ctx)),
        *(f for w in heads for meta, check in CHECKS if meta.id in HEAD_RULES
          for f in check(w, ctx)),
        *(f for w in fronts for meta, check in CHECKS if meta.id in FRONT_RULES
          for f in check(w, ctx)),
        *(f for w in skipped for f in shm_oversized(w))]  # a /dev/shm above the memory limit
    findings = _unique([*workload_findings, *committed_secrets(ctx), *configmap_secrets(ctx)])
    return FindingsReport(
        tool=TOOL,
        findings=findings,
        rules=all_rules(),
        files=list(inv.files),
        notes=_notes(inv, skipped, measured, checked) + ctx.notes + (
            ["not read (symbolic links that leave the directory given, or loop): "
             + "; ".join(links)] if links else []),
        coverage=[*([] if files is None else files.coverage), *_unread(checked)],
    )


def _unread(workloads: list[Workload]) -> list[CoverageNote]:
    """What following each container's start scripts did not read (k8s.script.MAX_DEPTH)."""
    from servelab.k8s.script import MAX_DEPTH

    notes: list[CoverageNote] = []
    for w in workloads:
        for c in (*w.init_containers, *w.containers):
            for what in c.unread:
                note = CoverageNote(
                    f"{what} (container {c.name} of {w.ref})",
                    f"servelab follows scripts {MAX_DEPTH} levels deep "
                    "(servelab.k8s.script.MAX_DEPTH)", file=w.obj.source.file)
                if note not in notes:
                    notes.append(note)
    return notes


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per rule, place, message and container: a ConfigMap script run by several
    pod templates is reported once, but what an init container does never hides what the
    serving container does at the same place (findings are per container and per source)."""
    seen: set[tuple[str | None, ...]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.rule_id, f.file, str(f.line), str(f.column), f.message,
               f.context.get("container"), f.context.get("pair"))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
