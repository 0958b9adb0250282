"""What a build fetches from the network: remote-add, download-unverified."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from servelab.findings import Severity
from servelab.lint import fetch
from servelab.lint.image import StageState, is_url
from servelab.lint.parse import Instruction, Stage
from servelab.lint.shell import commands

from . import RULES, Context, Hit
from ._common import values
from ._start import missing_note, missing_scripts, script_name, scripts
from .weights import reaches

_GIT_PROTOS = frozenset({"http", "https", "ssh", "git"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP = re.compile(r"[\w.-]+@[\w.-]+:")
#: a full commit id (SHA-1, or SHA-256 for a sha256 repository)
_COMMIT = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")


def git_source(src: str) -> tuple[str, str] | None:
    """(ref, checksum) of an ADD source BuildKit reads as a git repository (dfgitutil's
    ParseGitRef: ``git@host:path``, ``ssh://``, ``git://``, or ``http(s)://`` whose path
    ends in ``.git``; the ref from ``#ref[:subdir]`` or ``?ref=``/``tag=``/``branch=``, the
    checksum from ``?checksum=``/``commit=``), or None for any other source."""
    from urllib.parse import parse_qs, urlsplit

    m = _SCHEME.match(src)
    if m:
        proto = m.group(1).lower()
        if proto not in _GIT_PROTOS:
            return None
        url = urlsplit(src)
        if proto in {"http", "https"} and not url.path.endswith(".git"):
            return None
        fragment, query = url.fragment, url.query
    elif _SCP.match(src):
        rest, _hash, fragment = src.partition("#")
        query = rest.partition("?")[2]
    else:
        return None
    q = {k: v[0] for k, v in parse_qs(query).items() if v}
    ref = fragment.split(":", 1)[0] or q.get("ref") or q.get("tag") or q.get("branch") or ""
    return ref, q.get("checksum") or q.get("commit") or ""


def _pinned_git(src: str, checksum: str | None) -> bool | None:
    """Whether a git ADD source is fixed to one commit (a full commit id as its ref, or a
    checksum BuildKit compares the commit with); None when *src* is not a git source."""
    found = git_source(src)
    if found is None:
        return None
    ref, query_checksum = found
    return bool(checksum or query_checksum or _COMMIT.match(ref.lower()))


@RULES.rule(
    "remote-add",
    Severity.ERROR,
    "ADD of a URL without --checksum",
    rationale="ADD <url> fetches whatever the server returns at build time: the build is not "
    "reproducible and a compromised server changes the image silently. A git repository "
    "(ADD https://host/org/repo.git#ref, ADD git@host:org/repo.git#ref) is fixed only at a "
    "full commit id or with --checksum=<commit>: a branch or tag can move.",
    fix="add --checksum=sha256:<hex> to the ADD (BuildKit verifies it), or download in a RUN "
    "that checks a known hash; for a git repository, ADD it at a 40-hex commit (#<sha>) or "
    "add --checksum=<commit sha>",
)
def check_remote_add(ctx: Context) -> Iterator[Hit]:
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.cmd != "ADD":
                continue
            checksum = ins.flag("checksum")
            remote = []
            for src in values(ctx, st, ins.args[:-1]):
                pinned = _pinned_git(src, checksum)
                if pinned is None and is_url(src) and not checksum:
                    remote.append(src)
                elif pinned is False:
                    ref = git_source(src) or ("", "")
                    at = f"at {ref[0]}" if ref[0] else "at its default branch"
                    remote.append(f"{src} (a git repository {at}, which can move)")
            if remote:  # one finding per ADD, naming every URL it fetches
                yield Hit(
                    "remote-add",
                    ins.line,
                    f"ADD {', '.join(remote)} without --checksum",
                    context={"stage": st.label},
                )


def _run_problems(ctx: Context, st: Stage, state: StageState, ins: Instruction,
                  keys: list[fetch.KeyDownload]) -> Iterator[Hit]:
    text = ins.text()
    exp = fetch.expander(state.lookup, text, ctx.df.escape)
    found = [u.what for u in fetch.unverified_downloads(text, exp)]
    cmds = commands(text)
    # keys stay for the stage's later RUNs, at this RUN's line
    keys += [k._replace(line=ins.line) for k in fetch.key_downloads(cmds, text, exp)]
    found += [u.what for u in fetch.same_host_keys(fetch.apt_sources(cmds, exp), keys,
                                                   ins.line)]
    run_state = ctx.analysis.with_binds(state, ins)
    outer = fetch.expander(state.lookup, text, ctx.df.escape)

    def lookup(name: str) -> str | None:
        value = outer("${" + name + "}")
        return None if "$" in value else value

    for src, content in scripts(ctx, text, run_state, state.workdirs.get(ins.line), st):
        exp = fetch.expander(lookup, content, ctx.df.escape)
        found += [f"{u.what} in {script_name(src)}:{u.line}"
                  for u in fetch.unverified_downloads(content, exp, known_urls_only=True)]
    missing = missing_scripts(ctx, text, run_state, state.workdirs.get(ins.line), st)
    if found:
        note = f"; {missing_note(ctx, missing)}" if missing else ""
        yield Hit("download-unverified", ins.line,
                  f"RUN {'; '.join(found)}{reaches(ctx, st)}{note}",
                  context={"stage": st.label})
    elif missing:
        yield Hit("download-unverified", ins.line,
                  f"the downloads of this RUN were not judged: {missing_note(ctx, missing)}",
                  fix=f"pass --context with the directory docker build is given (now "
                  f"{ctx.context_dir})", context={"stage": st.label}, severity=Severity.INFO)


@RULES.rule(
    "download-unverified",
    Severity.WARNING,
    "a RUN runs or installs a download that nothing verifies",
    rationale="`curl ... | sh` (also `| VAR=x $PY -`), an installer, archive or program "
    "fetched with no checksum or signature check (get-pip.py, install.sh, *.tar.gz, a .deb "
    "for dpkg -i, a release binary), a `pip install` of a URL with no hash or of `git+` at a "
    "branch or tag, a git clone of a branch or tag (only a 40-hex commit is immutable) that "
    "is then built, or an apt repository trusted with a key downloaded from its own host "
    "with no fingerprint written in the Dockerfile: the build runs whatever "
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
    "git, check out a 40-hex commit before building (a tag is mutable); for an apt "
    "repository, COPY its keyring from the context or compare the downloaded key with a "
    "fingerprint written in the Dockerfile (gpg --show-keys --with-fingerprint KEY | grep "
    "-q <fingerprint>)",
)
def check_download_unverified(ctx: Context) -> Iterator[Hit]:
    flows: dict[int, fetch.Flow] = {}
    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        flow = fetch.Flow(_expanders(ctx, state))
        keys: list[fetch.KeyDownload] = []
        if st.parent is not None and st.parent in flows:
            flow.inherit(flows[st.parent])
        for ins in st.instructions:
            if ins.cmd == "RUN":
                yield from _run_problems(ctx, st, state, ins, keys)
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
    "build from a commit, the one immutable ref: git clone URL DIR && git -C DIR checkout "
    "<40-hex commit sha> (a tag can be moved, as an image tag can), or git clone --revision "
    "<sha> (git 2.49+); or install a released, pinned package instead"
)


def _expanders(ctx: Context, state: StageState) -> Callable[[str], fetch.Expand]:
    def make(text: str) -> fetch.Expand:
        return fetch.expander(state.lookup, text, ctx.df.escape)

    return make
