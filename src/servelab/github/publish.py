"""The entry points GitHub steps call: :func:`publish_run` (what ``servelab run`` does in a
step: outputs, job summary, annotations) and :func:`action_outputs` (the composite action's
hidden ``action-outputs`` command: outputs, the artifact plan, and the stop report when the
run stopped before its summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from servelab.github.annotations import Annotation, annotate, failure_annotations, workspace_dir
from servelab.github.artifacts import MAX_ARTIFACT_SLOTS, ArtifactPlan, artifact_plan, plan_outputs
from servelab.github.outputs import load_summary, outputs_from_summary, set_outputs, write_summary
from servelab.github.stop import publish_stop, stop_report
from servelab.textio import JSON_BYTES, read_text

# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def publish_run(
    results_dir: Path,
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """What ``servelab run`` does in a GitHub step: outputs, step summary, annotations (the
    lint findings of the treatment, then one ``::error`` per other failed check)."""
    summary = load_summary(results_dir)
    set_outputs(outputs_from_summary(summary, results_dir=results_dir), env=env)
    md = results_dir / "summary.md"
    if md.is_file():
        write_summary(
            read_text(md, max_bytes=JSON_BYTES, what="summary.md"),
            note=f"the full summary is {md} (also in the summary artifact)",
            env=env,
        )
    raw = summary.get("annotations")
    found = [Annotation.from_mapping(a) for a in raw if isinstance(a, Mapping)] \
        if isinstance(raw, list) else []
    found += failure_annotations(summary)
    workspace = workspace_dir(env)
    annotate(
        [a.in_workspace(workspace) for a in found],
        stream=stream,
        rest_hint=f"the job summary and the SARIF files in {results_dir} list them all",
    )


def action_outputs(
    results_dir: Path,
    *,
    prefix: str,
    job: str,
    attempt: int = 1,
    slots: int = MAX_ARTIFACT_SLOTS,
    upload: bool = True,
    leg: str = "",
    exit_code: int | None = None,
    log_text: str = "",
    roots: Sequence[Path] = (),
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The composite action's outputs: the summary's values and the artifact plan.

    With *upload* false the plan is empty, so no upload slot is filled and no name is output.
    When servelab run stopped without summary.json (*exit_code* known), its stop is reported
    first (:func:`publish_stop`, from *log_text*; *roots* are where a file an error names may
    be), so that summary.md exists and goes into the summary artifact.
    """
    summary: dict[str, Any] = {}
    if (results_dir / "summary.json").exists() or (results_dir / "summary.json").is_symlink():
        summary = load_summary(results_dir)  # a summary that is there must be good (exit 2)
    elif exit_code is not None:
        publish_stop(results_dir, stop_report(exit_code, log_text, roots=roots),
                     stream=stream, env=env)
    arms = summary.get("arms")
    arm_names = [str(a) for a in arms] if isinstance(arms, list) else []
    plan = (
        artifact_plan(results_dir, prefix=prefix, job=job, arms=arm_names, attempt=attempt,
                      slots=slots, leg=leg)
        if upload
        else ArtifactPlan()
    )
    outputs = outputs_from_summary(summary, results_dir=results_dir)
    outputs.update(plan_outputs(plan))
    set_outputs(outputs, env=env)
    if plan.overflow:
        annotate(
            [
                {
                    "level": "warning",
                    "title": "servelab: more repeats than artifact slots",
                    "message": (
                        f"{len(plan.repeats) + len(plan.overflow)} repeat directories but "
                        f"{slots} upload slots: the last {len(plan.overflow)} go together in "
                        f"the artifact {plan.overflow_name}; spread repeats over a matrix "
                        "(workflows-examples/matrix-fanout.yml) for one artifact each"
                    ),
                }
            ],
            stream=stream,
        )
    return outputs
