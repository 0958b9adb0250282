"""The readiness signal: no-health."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator
from typing import NamedTuple

from servelab.findings import Severity
from servelab.lint.downloads import is_koboldcpp
from servelab.lint.image import StageState
from servelab.lint.lazyre import LazyPattern
from servelab.lint.shell import commands, normalise

from . import RULES, Context, Hit
from ._start import Role, base_facts, role, scripts, start_texts

#: a start command whose program or script is named for a service (``opea_tts_microservice.py``,
#: ``proxy_service.py``, ``invokeai-web``, ``webui.sh``) or is a model server not named
#: ``*server`` (OpenVINO's ``ovms``, LocalAI, llamafile, KoboldCpp, infinity_emb,
#: ``gpustack start``)
_SERVICE_NAME = LazyPattern(
    r"\w*micro_?service\w*|\b\w+[_-]service(\.py|:\w+)|\bservice\.py\b|"
    r"\b[\w.]+-web\b|\bweb_?ui(\.py|\.sh)?\b|"
    r"(^|[\s/])(ovms|local-ai|llamafile|koboldcpp([-_][\w.-]+)?(\.py)?|infinity_emb|"
    r"gpustack\s+start)(\s|$)"
)
#: a web application's code: a framework's app served or launched from the script itself
_WEB_APP = LazyPattern(
    r"^\s*(from\s+(fastapi|flask|starlette|aiohttp|sanic|litestar|quart|bottle|tornado)\b|"
    r"import\s+(gradio|streamlit|uvicorn)\b)",
    re.M,
)
#: packages that are servers or web frameworks: installed into an image whose start script
#: servelab could not read, they say what the script starts
_SERVING_PACKAGES = frozenset({
    "vllm", "sglang", "text-generation-server", "torchserve", "mlserver", "bentoml",
    "litserve", "fastapi", "uvicorn", "gunicorn", "flask", "gradio", "streamlit",
    "xinference", "lmdeploy", "infinity-emb", "openllm", "kserve", "aphrodite-engine",
    "tritonserver", "ray[serve]", "kfserving",
})
#: the same without extras (``uvicorn[standard]``); plain ``ray`` is not a server
_SERVING_BARE = _SERVING_PACKAGES - {"ray[serve]"}
#: of those, the model servers (not web frameworks): with an interpreter running a module or
#: script that was not read, only these say it serves
_WEB_FRAMEWORKS = frozenset({"fastapi", "uvicorn", "gunicorn", "flask", "gradio", "streamlit"})
_MODEL_SERVERS = _SERVING_PACKAGES - _WEB_FRAMEWORKS
_MODEL_SERVERS_BARE = _SERVING_BARE - _WEB_FRAMEWORKS


class _Unread(NamedTuple):
    """The start program servelab could not read, and whether an interpreter runs it (a
    module or a script: ``python -m InferenceModel``) rather than it being a program."""

    name: str
    interpreted: bool = False
#: a server program copied into the image (``llama-server``, ``text-generation-launcher``,
#: ``text-embeddings-router-80``)
_SERVER_PROGRAM = LazyPattern(r"^[\w.-]*(server|router|launcher)(-[\w.]+)?$")
#: a model store copied in: TorchServe's folder of .mar archives, which only it serves
_MODEL_STORES = frozenset({"model-store", "model_store"})
_INTERPRETERS = LazyPattern(r"^(python[\d.]*|node|ruby|perl|java|Rscript)$")
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})


def _start_script_unread(ctx: Context) -> _Unread | None:
    """The start program or script when servelab could not read it (a script the build
    context lacks, a program built or copied in, the module or script an interpreter runs);
    asked only when no start script was read."""
    texts = [t for _i, t in start_texts(ctx.analysis.state())]
    words = _split(texts[0]) if texts else []
    for _ in range(2):  # `sh -c "..."` once, `bash start.sh` once
        argv = [w for w in words if not w.startswith("-")]
        while argv and (argv[0] in {"exec", "env"} or "=" in argv[0]):  # `exec X`, `env A=1 X`
            argv = argv[1:]
        if not argv:
            return None
        prog = argv[0].rsplit("/", 1)[-1]
        if prog not in _SHELLS:
            break
        inline = "-c" in words  # `sh -c "python serve.py"`: the string is the command
        words = (_split(argv[1]) if len(argv) > 1 else []) if inline else argv[1:]
    if not argv or argv[0].rsplit("/", 1)[-1] in _SHELLS:
        return None
    if _INTERPRETERS.match(argv[0].rsplit("/", 1)[-1]):
        # `python -m InferenceModel`, `python serve.py`: what it runs was not read either
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else None
        found = module or next((w for w in argv[1:] if w.endswith(".py")), None)
        return _Unread(found, interpreted=True) if found else None
    return _Unread(argv[0])


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _installed_server(ctx: Context, *, model_servers: bool = False) -> str | None:
    """What of the final image says it holds a server: a serving package installed (pip) or
    a server program copied in (``COPY --from=builder .../llama-server /llama-server``).
    *model_servers*: only a model server's package counts (a web framework installed beside
    a Python tool does not make ``python -m tool`` a server)."""
    packages, bare = ((_MODEL_SERVERS, _MODEL_SERVERS_BARE) if model_servers
                      else (_SERVING_PACKAGES, _SERVING_BARE))
    for st in ctx.analysis.chain():
        for ins in st.instructions:
            if ins.cmd in {"COPY", "ADD"} and len(ins.args) >= 2:
                for i, word in enumerate(ins.args):
                    name = posixpath.basename(word.rstrip("/*").rstrip("/"))
                    if (name.lower() in _MODEL_STORES and i < len(ins.args) - 1
                            and not ins.flag("from")):
                        # what only a model server reads: TorchServe's .mar archives
                        return f"{ins.cmd} of a TorchServe model store ({name}/) at line {ins.line}"
                    if ("." not in name and _SERVER_PROGRAM.match(name)
                            and not model_servers):
                        return f"{ins.cmd} of {name} at line {ins.line}"
            elif ins.cmd == "RUN":
                for cmd in commands(ins.text()):
                    argv = normalise(list(cmd.argv))
                    if argv[:1] != ["pip"] or "install" not in argv:
                        continue
                    for word in argv[argv.index("install") + 1:]:
                        name = re.split(r"[=<>!~;@ ]", word.lower(), maxsplit=1)[0]
                        if name in packages or name.split("[", 1)[0] in bare:
                            return f"pip install {name} at line {ins.line}"
    return None


def _echoed(ctx: Context, script: str) -> str:
    """What RUNs of the final image's stages wrote into *script* with echo/printf
    (``RUN echo python serve.py >> run.sh``)."""
    name = posixpath.basename(script)
    out = []
    for st in ctx.analysis.chain():
        for ins in st.instructions:
            if ins.cmd != "RUN":
                continue
            for m in re.finditer(r"\b(?:echo|printf)\s+(.+?)\s*>>?\s*(\S+)", ins.text()):
                if posixpath.basename(m.group(2).strip("'\"")) == name:
                    out.append(m.group(1))
    return "\n".join(out)


def serving_evidence(ctx: Context) -> str | None:
    """Why a final image that EXPOSEs nothing and whose start command names no known server
    launcher still serves (None when nothing shows it): a start command named for a service,
    a start script that is a web app or writes one, or a start script servelab could not
    read in an image built to hold a server."""
    state = ctx.analysis.state()
    text = " ".join(t for _i, t in start_texts(state))
    if not text.strip():
        return None
    if m := _SERVICE_NAME.search(text):
        return f"its start command runs {m.group(0).strip(' /')!r}"
    read = False
    for src, content in scripts(ctx, text, state, stage=ctx.df.final):
        read = True
        if m := _WEB_APP.search(content) or _SERVICE_NAME.search(content):
            return f"{src.image_path} runs {m.group(0).strip()!r}"
    unread = None if read else _start_script_unread(ctx)
    if unread is None:
        return None  # a script that was read and shows no server is judged by its content
    echoed = _echoed(ctx, unread.name)
    if m := _SERVICE_NAME.search(echoed):
        return f"{unread.name}, written by a RUN, runs {m.group(0).strip()!r}"
    if installed := _installed_server(ctx, model_servers=unread.interpreted):
        return (f"its start program {unread.name} was not read, and the image holds a server "
                f"({installed})")
    return None


@RULES.rule(
    "no-health",
    Severity.WARNING,
    "a server image with no HEALTHCHECK and no health endpoint declared",
    rationale="Without a readiness signal nobody can tell a server that is loading weights "
    "from one that hangs, and cold-start time cannot be measured. Only long-running servers "
    "are judged: an EXPOSE, a start command (or the start script it runs) that starts a "
    "server or is named for a service (opea_tts_microservice.py, invokeai-web, ovms), a start "
    "script that is a web app (FastAPI, Flask, Gradio ...), or a start program servelab could "
    "not read in an image that holds a server (a serving package installed, a server program "
    "copied in). Init containers, CI, batch jobs, CLI tools, base and library images are left "
    "alone, and so is an image that runs its base's program (no ENTRYPOINT, and no CMD or only "
    "a CMD of arguments: the base's HEALTHCHECK is unknown without --resolve-base).",
    fix="add HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1, or declare the "
    "health endpoint in the experiment spec",
)
def check_no_health(ctx: Context) -> Iterator[Hit]:
    if ctx.health_declared or ctx.analysis.state().healthcheck is not None:
        return
    facts = base_facts(ctx)
    if facts is not None and facts.healthcheck:
        return
    verdict = role(ctx)
    evidence = verdict.evidence
    if verdict.role == Role.UNKNOWN:
        evidence = serving_evidence(ctx) or ""
    elif verdict.role != Role.SERVER:
        return
    if not evidence:
        return
    state = ctx.analysis.state()
    if facts is None and state.entrypoint is None and (
        state.cmd is None or (state.cmd.args and state.cmd.args[0].startswith("-"))
    ):
        return  # it runs its base's program, and the base may well have a HEALTHCHECK
    if state.entrypoint is not None and not any(t.strip() for _i, t in start_texts(state)):
        return  # `ENTRYPOINT []` and no CMD: no command at all, a base for others' images
    final = ctx.df.final
    yield Hit(
        "no-health",
        final.from_instr.line,
        f"the final image is a server ({evidence}) with no HEALTHCHECK (or "
        "HEALTHCHECK NONE) and no health endpoint declared",
        context={"stage": final.label},
        fix=_known_fix(state),
    )


def _known_fix(state: StageState) -> str | None:
    """The fix naming a known server's own readiness endpoint (KoboldCpp: /api/v1/model,
    which answers once the model is loaded), or None (the rule's own fix)."""
    text = " ".join(t for _i, t in start_texts(state))
    if any(is_koboldcpp(c) for c in commands(text)):
        return ("add HEALTHCHECK CMD curl -fsS http://127.0.0.1:5001/api/v1/model || exit 1 "
                "(KoboldCpp's model endpoint answers once the model is loaded; use the --port "
                "it is given)")
    return None
