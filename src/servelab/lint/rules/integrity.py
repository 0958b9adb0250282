"""What a build fetches from the network: remote-add, download-unverified."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from servelab.findings import Severity
from servelab.lint import fetch
from servelab.lint.image import StageState, is_url
from servelab.lint.parse import Instruction, Stage

from . import RULES, Context, Hit
from ._common import values
from ._start import script_name, scripts
from .weights import reaches


@RULES.rule(
    "remote-add",
    Severity.ERROR,
    "ADD of a URL without --checksum",
    rationale="ADD <url> fetches whatever the server returns at build time: the build is not "
    "reproducible and a compromised server changes the image silently.",
    fix="add --checksum=sha256:<hex> to the ADD (BuildKit verifies it), or download in a RUN "
    "that checks a known hash",
)
def check_remote_add(ctx: Context) -> Iterator[Hit]:
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.cmd != "ADD" or ins.flag("checksum"):
                continue
            remote = [src for src in values(ctx, st, ins.args[:-1]) if is_url(src)]
            if remote:  # one finding per ADD, naming every URL it fetches
                yield Hit(
                    "remote-add",
                    ins.line,
                    f"ADD {', '.join(remote)} without --checksum",
                    context={"stage": st.label},
                )


def _run_problems(ctx: Context, st: Stage, state: StageState,
                  ins: Instruction) -> Iterator[Hit]:
    text = ins.text()
    found = [u.what for u in fetch.unverified_downloads(
        text, fetch.expander(state.lookup, text, ctx.df.escape))]
    run_state = ctx.analysis.with_binds(state, ins)
    outer = fetch.expander(state.lookup, text, ctx.df.escape)

    def lookup(name: str) -> str | None:
        value = outer("${" + name + "}")
        return None if "$" in value else value

    for src, content in scripts(ctx, text, run_state, state.workdirs.get(ins.line), st):
        exp = fetch.expander(lookup, content, ctx.df.escape)
        found += [f"{u.what} in {script_name(src)}:{u.line}"
                  for u in fetch.unverified_downloads(content, exp, known_urls_only=True)]
    if found:
        yield Hit("download-unverified", ins.line, f"RUN {'; '.join(found)}{reaches(ctx, st)}",
                  context={"stage": st.label})


@RULES.rule(
    "download-unverified",
    Severity.WARNING,
    "a RUN runs or installs a download that nothing verifies",
    rationale="`curl ... | sh` (also `| VAR=x $PY -`), an installer, archive or program "
    "fetched with no checksum or signature check (get-pip.py, install.sh, *.tar.gz, a .deb "
    "for dpkg -i, a release binary), a `pip install` of a URL with no hash or of `git+` at a "
    "branch or tag, or a git clone of a branch that is then built: the build runs whatever "
    "the server (or the branch) holds that day, so it is neither reproducible nor protected "
    "from a compromised download. A download used in a later RUN, or in a stage that copies "
    "it with COPY --from, counts the same, naming both lines. Only a digest or key written in "
    "the Dockerfile or the context verifies: mentioning gpg, or a checksum or key fetched "
    "from the same host in the same build, does not. Scripts the RUN runs from the build "
    "context are read too.",
    fix="pin a version and verify it: download to a file, check it with echo '<sha256>  file' "
    "| sha256sum -c - (the digest written in the Dockerfile), or gpg --verify with a key "
    "imported by its fingerprint, or cosign verify, before running it, or use ADD "
    "--checksum=sha256:<hex>; pip: a URL with #sha256=<hex> or git+...@<40-hex commit>; for "
    "git, check out a commit (or a tag) before building",
)
def check_download_unverified(ctx: Context) -> Iterator[Hit]:
    flows: dict[int, fetch.Flow] = {}
    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        flow = fetch.Flow(_expanders(ctx, state))
        if st.parent is not None and st.parent in flows:
            flow.inherit(flows[st.parent])
        for ins in st.instructions:
            if ins.cmd == "RUN":
                yield from _run_problems(ctx, st, state, ins)
                flow.run(ins.line, ins.text(), state.workdirs.get(ins.line, "/"))
            elif ins.cmd == "COPY" and len(ins.args) >= 2:
                _copy_from(ctx, flows, flow, ins)
        flows[st.index] = flow
        for line, what in flow.found:
            yield Hit("download-unverified", line, f"RUN {what}",
                      fix=_CLONE_FIX if what.startswith("clones") else None,
                      context={"stage": st.label})


def _copy_from(ctx: Context, flows: dict[int, fetch.Flow], flow: fetch.Flow,
               ins: Instruction) -> None:
    """A ``COPY --from=<stage>`` brings that stage's clones and downloads along."""
    ref = ins.flag("from")
    src = ctx.df.stage_by_ref(ref) if ref else None
    if src is not None and src.index in flows:
        flow.copy_from(flows[src.index], list(ins.args[:-1]), ins.args[-1], ins.line,
                       src.label)


_CLONE_FIX = (
    "build from a tag or a commit: git clone --branch v1.2.3 --depth 1 URL, or git checkout "
    "<commit sha> before building; or install a released, pinned package instead"
)


def _expanders(ctx: Context, state: StageState) -> Callable[[str], fetch.Expand]:
    def make(text: str) -> fetch.Expand:
        return fetch.expander(state.lookup, text, ctx.df.escape)

    return make
