"""What the container does when it starts: startup-download."""

from __future__ import annotations

import re
from collections.abc import Iterator

from servelab.findings import Severity
from servelab.lint import downloads, follow, shell
from servelab.lint.catalogue import FIRST_START
from servelab.lint.coverage import CoverageNote
from servelab.lint.image import StageState
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction

from . import RULES, Context, Hit
from ._start import Role, final_base, role, script_name, scripts, start_texts


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
    "too (Makefile recipes included), and the Python application it starts (uvicorn or "
    "gunicorn app specs and factories, python -m, python app.py, fastapi run) is followed "
    "through its imports: hub loads at import, under __main__, in lifespan and startup hooks "
    "and app factories are errors; a load in a route handler happens at the first request "
    "and is a warning. An image whose start command is a one-shot job (an init container or "
    "downloader: storage-initializer, download_model.py) is left alone: downloading is its "
    "job.",
    fix="install at build time, mount the weights read-only (-v model:/models:ro) and set "
    "HF_HUB_OFFLINE=1 so hub model ids resolve from the local cache",
)
def check_startup_download(ctx: Context) -> Iterator[Hit]:
    state = ctx.analysis.state()
    texts = start_texts(state, final_base(ctx))
    if not texts or role(ctx).role == Role.JOB:
        return
    said = list(_start_hits(ctx, texts, state))  # what the start command was found to fetch
    if not any(downloads.script_offline(text) for _primary, text in texts):
        env = list(_env_models(ctx, state, texts[0][0], "\n".join(t for _p, t in texts), said))
        said += env
    yield from said


def _start_hits(ctx: Context, texts: list[tuple[Instruction, str]],
                state: StageState) -> Iterator[Hit]:
    for primary, text in texts:
        apps = _applications(ctx, text, state)
        read = {p for app, _token in apps for p in app.read}
        for p in downloads.start_problems(text, state.env):
            ins = _attribute(p.token, primary, state)
            yield from _problem_hit(ctx, ins, f"the {ins.cmd}", p, {})
        for src, content in scripts(ctx, text, state, stage=ctx.df.final):
            if src.context_path in read:
                continue  # Python the application walk read: judged by what runs when
            code = follow.without_comments(content, src.image_path.endswith(".py"))
            for p in downloads.start_problems(code, state.env):
                ins = _attribute(src.image_path.rsplit("/", 1)[-1], primary, state)
                where = f"{script_name(src)}:{p.line}"
                yield from _problem_hit(ctx, ins, f"{src.image_path}, run by {ins.cmd},", p,
                                        {"script": where}, where=f" ({where})")
        for app, token in apps:
            yield from _app_hits(ctx, app, _attribute(token, primary, state))
        if not apps:
            yield from _missing_scripts(ctx, text, primary, state)


#: ENV names that hold the model a server loads (WHISPER__MODEL, MODEL_ID, HF_MODEL_NAME...);
#: not the name the server answers to (SERVED_MODEL_NAME) nor an alias
_MODEL_ENV = LazyPattern(r"MODEL(?:_?ID|_?NAME|_?REPO|_?PATH)?$")
_LABEL_ENV = LazyPattern(r"SERVED|ALIAS|DISPLAY|LABEL")


def _env_models(ctx: Context, state: StageState, start: Instruction,
                start_text: str, said: list[Hit]) -> Iterator[Hit]:
    """An ENV of the final image that names a hub model id (``WHISPER_MODEL=org/name``) for
    the server it starts, with HF_HUB_OFFLINE unset and nothing in the build that fetches or
    copies that id or reads that variable: the server downloads it at start. A variable the
    start command itself uses is judged there (what it passes, offline or not), and so is
    one whose id the start command passes itself (*said*: the start command's findings),
    whose finding then names the ENV too: one download, one finding. A warning: servelab
    sees the name, not the server's code that reads it."""
    if downloads.offline(state.env):
        return
    built = " ".join(i.original for i in ctx.df.instructions if i.cmd in {"RUN", "COPY", "ADD"})
    for name, value in state.env.items():
        if (_MODEL_ENV.search(name.upper()) and not _LABEL_ENV.search(name.upper())
                and downloads.is_hub_id(value) and value not in built and name not in built
                and not re.search(rf"\$\{{?{name}\b", start_text)):
            same = [h for h in said if f"{value!r}" in h.message]
            if same:
                env = _env_line(ctx, name)
                for hit in same:
                    hit.message += (f" (ENV {name}{f' at line {env}' if env else ''} "
                                    "names the same model)")
                continue
            yield Hit("startup-download", start.line,
                      f"ENV {name} names the hub model {value!r} and nothing in the build "
                      f"fetches or copies it: the server the {start.cmd} starts downloads it "
                      "at start (HF_HUB_OFFLINE unset)", severity=Severity.WARNING,
                      fix="download it at build time into the image's cache or mount it "
                      "read-only, and set HF_HUB_OFFLINE=1")


def _env_line(ctx: Context, name: str) -> int | None:
    """The line of the last ENV of the final image's stages that sets *name* (None: the
    base image sets it)."""
    found = None
    for st in ctx.analysis.chain():
        for ins in st.instructions:
            if ins.cmd == "ENV" and name in ins.args[0::2]:
                found = ins.line
    return found


def _problem_hit(ctx: Context, ins: Instruction, who: str, p: downloads.StartProblem,
                 context: dict[str, str], *, where: str = "") -> Iterator[Hit]:
    """One start problem: a fetch at every start (an error), a first-start download behind
    a file test (a warning), or a form the shell reader could not take apart (a coverage
    note on the report, which makes it "partly checked": docs/limits.md)."""
    if p.unread:
        ctx.analysis.coverage.add(CoverageNote(
            f"{who} {p.what}{where}",
            "what it runs at start is not known before it runs; write the command out, or "
            "set the variable in the same script or with ENV, so servelab can read it",
            line=ins.line))
        return
    if p.guard:
        yield Hit("startup-download", ins.line, f"{who} {p.what}{where}",
                  severity=Severity.WARNING, context=context,
                  fix=f"put {p.guard} on a persistent volume filled before the first start "
                  "(an init container or a pre-pulled cache), or fetch at build time")
        return
    yield Hit("startup-download", ins.line, f"{who} {p.what}{where}", context=context)


def _applications(ctx: Context, text: str,
                  state: StageState) -> list[tuple[follow.Followed, str]]:
    """The Python applications the start command starts, directly or from the shell scripts
    it runs, followed into the build context; each with the word that shows which
    instruction starts it (the app spec, or the script's name)."""
    found: list[tuple[follow.Followed, str]] = []
    sources: list[tuple[str, dict[str, str], str]] = [(text, {}, "")]
    for src, content in scripts(ctx, text, state, stage=ctx.df.final):
        if not src.image_path.endswith(".py"):
            sources.append((content, shell.assignments(content),
                            src.image_path.rsplit("/", 1)[-1]))
    seen: set[tuple[str, ...]] = set()
    for body, env, token in sources:
        for entry in follow.entries(body, state, state.workdir):
            if entry.paths in seen:
                continue
            seen.add(entry.paths)
            found.append((follow.follow_app(ctx.analysis, entry, env),
                          token or entry.shown.split()[-1]))
    return found


def _app_hits(ctx: Context, app: follow.Followed, ins: Instruction) -> Iterator[Hit]:
    bound = (f" (the walk stopped at {follow.MAX_MODULES} modules, servelab's bound: loads "
             "in modules past it were not looked for)") if app.truncated else ""
    missing = _missing(ctx, app)
    if missing and not app.loads and _FETCH_NAME.search(app.missing[0][0].rsplit("/", 1)[-1]):
        yield _named_download(ins, app.entry.shown, *app.missing[0])
        return
    if missing and not app.loads and downloads.known_server_program(app.missing[0][0]):
        return  # a known server's own code (koboldcpp.py): its options were judged
    if missing and not app.loads:
        path, copy = app.missing[0]
        yield Hit("startup-download", ins.line,
                  f"{app.entry.shown}, run by {ins.cmd}, was not followed: {path} comes from "
                  f"the build context ({copy.cmd} at line {copy.line}), which lacks it, so the "
                  "application's code was not read", severity=Severity.INFO,
                  fix=f"pass --context with the directory docker build is given (now "
                  f"{ctx.context_dir})")
        return
    first = [f for f in app.loads if f.when == follow.START and f.kind == FIRST_START]
    if first and not _ran_at_build(ctx, app):
        shown = "; ".join(f"{f.what} at {f.where} ({f.via})" for f in first)
        yield Hit("startup-download", ins.line,
                  f"{app.entry.shown}, run by {ins.cmd}, downloads at first start, when the "
                  f"files it checks for are missing (once, if they are on a persistent "
                  f"volume): {shown}{bound}{missing}", context={"script": first[0].where},
                  severity=Severity.WARNING,
                  fix="fill the volume before the first start (an init container or a "
                  "pre-pulled cache), or fetch at build time")
    for when in (follow.START, follow.REQUEST):
        loads = [f for f in app.loads if f.when == when and f.kind != FIRST_START]
        if not loads:
            continue
        shown = "; ".join(f"{f.what} at {f.where} ({f.via})" for f in loads)
        kinds = {f.kind for f in loads}
        verb = ("installs packages" if kinds == {"install"} else
                "downloads from the network" if kinds == {"hub"} else "downloads and installs")
        if when == follow.START:
            what = f"{verb} at start"
        else:
            what = (f"{verb} at the first request, not at start (a request waits for "
                    "it)")
        yield Hit("startup-download", ins.line,
                  f"{app.entry.shown}, run by {ins.cmd}, {what}: {shown}{bound}{missing}",
                  context={"script": loads[0].where},
                  severity=None if when == follow.START else Severity.WARNING)


def _ran_at_build(ctx: Context, app: follow.Followed) -> bool:
    """Whether a RUN of the final image already ran the application's entry (``RUN python
    download_model.py`` before ``CMD`` runs it again): its file check then finds the files
    in place, and the guarded download never runs."""
    words = app.entry.shown.split()
    script = next((w for w in words if w.endswith(".py")), "")
    if not script:
        return False
    name = script.rsplit("/", 1)[-1]
    return any(ins.cmd == "RUN" and name in ins.text()
               for st in ctx.analysis.chain() for ins in st.instructions)


#: a script named for fetching (``download_model.py``, ``fetch-weights.sh``, ``pull_models``)
_FETCH_NAME = LazyPattern(r"(^|[._-])(download|fetch|pull)(s|ing|er)?([._-]|$)", re.I)


def _named_download(ins: Instruction, shown: str, path: str, copy: Instruction) -> Hit:
    """A start script named for fetching that the build context lacks (COPY *copy*): a
    warning judged by its name, in an image that starts a server (not a downloader job)."""
    return Hit("startup-download", ins.line,
               f"{ins.cmd} runs {shown} at start, named for a download, before the server; "
               f"the build context lacks {path} ({copy.cmd} at line {copy.line}), so only its "
               "name was judged", severity=Severity.WARNING)


def _missing_scripts(ctx: Context, text: str, primary: Instruction,
                     state: StageState) -> Iterator[Hit]:
    """A script the start command runs that a COPY takes from the build context, which
    lacks it: nothing in it was read (an info finding pointing to --context), or, when its
    name says it fetches (``download_model.py``) and the server starts after it (the image is
    a server, not a downloader job), a warning judged by that name."""
    for cmd in shell.commands(text):
        for word in cmd.argv:
            path = ctx.analysis.resolve_in_image(word, state)
            src = ctx.analysis.source_of(path, state) if path else None
            if path is None or (src is not None and (src.context_path is None
                                                     or src.context_path.is_file())):
                continue
            if downloads.known_server_program(path):
                continue  # a known server (KoboldCpp's binary): its options were judged
            copy = follow.missing_copy(ctx.analysis, ctx.df.final, path)
            if copy is not None and _FETCH_NAME.search(path.rsplit("/", 1)[-1]):
                yield _named_download(_attribute(word, primary, state), path, path, copy)
                return
            if copy is not None:
                ins = _attribute(word, primary, state)
                yield Hit("startup-download", ins.line,
                          f"{path}, run by {ins.cmd}, comes from the build context "
                          f"({copy.cmd} at line {copy.line}), which lacks it, so what it "
                          "runs at start was not read", severity=Severity.INFO,
                          fix="pass --context with the directory docker build is given "
                          f"(now {ctx.context_dir})")
                return


def _missing(ctx: Context, app: follow.Followed) -> str:
    if not app.missing:
        return ""
    paths = ", ".join(p for p, _c in app.missing[:3])
    return (f"; {paths} of the application, copied from the build context, is not in "
            f"{ctx.context_dir}, so it was not read (pass --context with the directory "
            "docker build is given)")
