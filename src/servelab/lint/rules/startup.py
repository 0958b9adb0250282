"""What the container does when it starts: startup-download."""

from __future__ import annotations

from collections.abc import Iterator

from servelab.findings import Severity
from servelab.lint import downloads
from servelab.lint.image import StageState
from servelab.lint.parse import Instruction

from . import RULES, Context, Hit
from ._start import Role, role, script_name, scripts, start_texts


def _attribute(token: str, primary: Instruction, state: StageState) -> Instruction:
    cmd = state.cmd
    if cmd is not None and cmd is not primary and token and token in cmd.original:
        return cmd
    return primary


@RULES.rule(
    "startup-download",
    Severity.ERROR,
    "the start command downloads or installs at start",
    rationale="Work done at every start (pip install, model downloads, git clone) makes cold "
    "start slow and fragile: it fails without network, varies with the hub, and runs again "
    "on each replica. Scripts the Dockerfile copies in and the start command runs are read "
    "too. An image whose start command is a one-shot job (an init container or downloader: "
    "storage-initializer, download_model.py) is left alone: downloading is its job.",
    fix="install at build time, mount the weights read-only (-v model:/models:ro) and set "
    "HF_HUB_OFFLINE=1 so hub model ids resolve from the local cache",
)
def check_startup_download(ctx: Context) -> Iterator[Hit]:
    state = ctx.analysis.state()
    texts = start_texts(state)
    if not texts or role(ctx).role == Role.JOB:
        return
    for primary, text in texts:
        for p in downloads.start_problems(text, state.env):
            ins = _attribute(p.token, primary, state)
            yield Hit("startup-download", ins.line, f"the {ins.cmd} {p.what}")
        for src, content in scripts(ctx, text, state):
            for p in downloads.start_problems(content, state.env):
                ins = _attribute(src.image_path.rsplit("/", 1)[-1], primary, state)
                where = f"{script_name(src)}:{p.line}"
                yield Hit(
                    "startup-download",
                    ins.line,
                    f"{src.image_path}, run by {ins.cmd}, {p.what} ({where})",
                    context={"script": where},
                )
