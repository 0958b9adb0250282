"""servelab.github: everything that speaks GitHub's protocols, and nothing else does.

* :mod:`~servelab.github.outputs`: the step files: ``GITHUB_OUTPUT`` (names checked, heredoc
  delimiters drawn until unique), ``GITHUB_STEP_SUMMARY`` (1 MiB cap), the outputs a run's
  summary.json gives.
* :mod:`~servelab.github.annotations`: ``::error``/``::warning`` annotations, ranked and capped
  as GitHub shows them, and ``::stop-commands::`` around untrusted text.
* :mod:`~servelab.github.stop`: the report of a run that stopped before its summary.
* :mod:`~servelab.github.artifacts`: the artifact plan, one artifact per repeat.
* :mod:`~servelab.github.prcomment`: the sticky pull-request comment (GitHub's REST API).
* :mod:`~servelab.github.publish`: the entry points a GitHub step calls (:func:`publish_run`,
  :func:`action_outputs`).

It reads the run's documents (:mod:`servelab.run`) and never the other way round. Names are
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.github.annotations import (
        ANNOTATIONS_PER_LEVEL,
        LEVELS,
        Annotation,
        annotate,
        check_annotation,
        failure_annotations,
        rank_annotations,
        stop_commands,
        workspace_dir,
    )
    from servelab.github.artifacts import (
        MAX_ARTIFACT_SLOTS,
        ArtifactPlan,
        artifact_name,
        artifact_plan,
        matrix_leg,
        plan_outputs,
        repeat_dirs,
    )
    from servelab.github.outputs import (
        FINDING_LEVELS,
        NODE_OUTPUTS,
        SUMMARY_LIMIT,
        format_output,
        in_github_actions,
        load_summary,
        new_delimiter,
        output_text,
        outputs_from_summary,
        set_outputs,
        write_summary,
    )
    from servelab.github.prcomment import (
        CommentOutcome,
        GitHubApi,
        PullRequest,
        comment_body,
        comment_on_pr,
        load_event,
        post_sticky_comment,
        pull_request,
    )
    from servelab.github.publish import (
        action_outputs,
        publish_run,
    )
    from servelab.github.stop import (
        COMMAND_PREFIX,
        EXIT_MEANINGS,
        FLAG_INPUTS,
        RunLog,
        StopReport,
        action_hint,
        parse_run_log,
        publish_stop,
        stop_report,
    )

_WHERE = {
    "SUMMARY_LIMIT": "outputs",
    "in_github_actions": "outputs",
    "output_text": "outputs",
    "new_delimiter": "outputs",
    "format_output": "outputs",
    "set_outputs": "outputs",
    "write_summary": "outputs",
    "FINDING_LEVELS": "outputs",
    "outputs_from_summary": "outputs",
    "NODE_OUTPUTS": "outputs",
    "load_summary": "outputs",
    "ANNOTATIONS_PER_LEVEL": "annotations",
    "LEVELS": "annotations",
    "Annotation": "annotations",
    "rank_annotations": "annotations",
    "annotate": "annotations",
    "stop_commands": "annotations",
    "workspace_dir": "annotations",
    "check_annotation": "annotations",
    "failure_annotations": "annotations",
    "EXIT_MEANINGS": "stop",
    "FLAG_INPUTS": "stop",
    "action_hint": "stop",
    "COMMAND_PREFIX": "stop",
    "RunLog": "stop",
    "parse_run_log": "stop",
    "StopReport": "stop",
    "stop_report": "stop",
    "publish_stop": "stop",
    "MAX_ARTIFACT_SLOTS": "artifacts",
    "artifact_name": "artifacts",
    "matrix_leg": "artifacts",
    "ArtifactPlan": "artifacts",
    "repeat_dirs": "artifacts",
    "artifact_plan": "artifacts",
    "plan_outputs": "artifacts",
    "publish_run": "publish",
    "action_outputs": "publish",
    "PullRequest": "prcomment",
    "CommentOutcome": "prcomment",
    "pull_request": "prcomment",
    "load_event": "prcomment",
    "comment_body": "prcomment",
    "GitHubApi": "prcomment",
    "post_sticky_comment": "prcomment",
    "comment_on_pr": "prcomment",
}
__all__ = [
    "ANNOTATIONS_PER_LEVEL",
    "COMMAND_PREFIX",
    "EXIT_MEANINGS",
    "FINDING_LEVELS",
    "FLAG_INPUTS",
    "LEVELS",
    "MAX_ARTIFACT_SLOTS",
    "NODE_OUTPUTS",
    "SUMMARY_LIMIT",
    "Annotation",
    "ArtifactPlan",
    "CommentOutcome",
    "GitHubApi",
    "PullRequest",
    "RunLog",
    "StopReport",
    "action_hint",
    "action_outputs",
    "annotate",
    "artifact_name",
    "artifact_plan",
    "check_annotation",
    "comment_body",
    "comment_on_pr",
    "failure_annotations",
    "format_output",
    "in_github_actions",
    "load_event",
    "load_summary",
    "matrix_leg",
    "new_delimiter",
    "output_text",
    "outputs_from_summary",
    "parse_run_log",
    "plan_outputs",
    "post_sticky_comment",
    "publish_run",
    "publish_stop",
    "pull_request",
    "rank_annotations",
    "repeat_dirs",
    "set_outputs",
    "stop_commands",
    "stop_report",
    "workspace_dir",
    "write_summary",
]
__getattr__ = lazy_exports(__name__, _WHERE)
