"""Recognise model weights in paths, weight downloads in build steps, and downloads or
installs in a start command or start script."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from servelab.lint.shell import SimpleCommand, commands

WEIGHT_EXT = (
    ".safetensors",
    ".pt",
    ".pth",
    ".ckpt",
    ".gguf",
    ".ggml",
    ".onnx",
    ".h5",
    ".tflite",
    ".keras",
)
WEIGHT_DIRS = frozenset({"models", "weights", "checkpoints"})
_BIN_NAME = re.compile(r"^(pytorch_model|adapter_model|model|consolidated)[\w.-]*\.bin$", re.I)
_URL = re.compile(r"^(https?|ftp)://([^/:@]+@)?(\[[^\]]+\]|[^/:]+)", re.I)
_LOOPBACK = {"localhost", "127.0.0.1", "0.0.0.0", "[::1]", "::1"}  # noqa: S104
_HUB_URL = re.compile(r"huggingface\.co/|hf\.co/|/resolve/[^/]+/", re.I)
_HUB_CALL = re.compile(
    r"\b(snapshot_download|hf_hub_download|torch\.hub\.load(_state_dict_from_url)?|"
    r"from_pretrained)\s*\(",
)
_START_HUB_CALL = re.compile(r"\b(snapshot_download|hf_hub_download|torch\.hub\.load)\s*\(")
_MODEL_OPTS = frozenset(
    {
        "--model",
        "--model-id",
        "--model_id",
        "--model-path",
        "--model-name-or-path",
        "--model_name_or_path",
        "--tokenizer",
    }
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = {"1", "true", "yes", "on"}
_INSTALLERS = {
    ("pip", "install"),
    ("pipx", "install"),
    ("conda", "install"),
    ("mamba", "install"),
    ("apt-get", "install"),
    ("apt", "install"),
    ("apk", "add"),
    ("npm", "install"),
    ("npm", "i"),
    ("npm", "ci"),
    ("yarn", "add"),
    ("uv", "sync"),
    ("poetry", "install"),
}
_FETCHERS = {
    ("huggingface-cli", "download"),
    ("hf", "download"),
    ("git", "clone"),
    ("git", "lfs"),
    ("ollama", "pull"),
}


def is_weight_path(path: str) -> bool:
    """Whether a COPY/ADD source looks like model weights or a weights directory."""
    p = path.split("?", 1)[0].rstrip("/")
    parts = [x for x in p.split("/") if x not in {"", "."}]
    if not parts:
        return False
    name = parts[-1].lower()
    if name.endswith(WEIGHT_EXT):
        return True
    dirs = {x.lower() for x in parts}
    if name.endswith(".bin") and (dirs & WEIGHT_DIRS or _BIN_NAME.match(name)):
        return True
    return bool(dirs & WEIGHT_DIRS)


def urls(argv: list[str]) -> list[str]:
    return [a for a in argv if _URL.match(a)]


def is_loopback(url: str) -> bool:
    m = _URL.match(url)
    return bool(m) and m is not None and m.group(3).lower() in _LOOPBACK


def _pair(cmd: SimpleCommand) -> tuple[str, str]:
    args = [a for a in cmd.argv[1:] if not a.startswith("-")]
    return (cmd.name, args[0] if args else "")


def build_weight_downloads(text: str) -> list[str]:
    """What in a RUN's text downloads model weights at build time (one phrase each)."""
    out: list[str] = []
    for cmd in commands(text):
        pair = _pair(cmd)
        if pair in {("huggingface-cli", "download"), ("hf", "download"), ("ollama", "pull")}:
            out.append(" ".join(cmd.argv[:2]))
        elif pair == ("git", "lfs") and "pull" in cmd.argv:
            out.append("git lfs pull")
        elif pair == ("git", "clone") and any(_HUB_URL.search(u) for u in urls(cmd.argv)):
            out.append("git clone of a model repository")
        elif cmd.name in {"curl", "wget"}:
            for u in urls(cmd.argv):
                if is_weight_path(u) or _HUB_URL.search(u):
                    out.append(f"{cmd.name} {u}")
    out += [f"{m.group(1)}()" for m in _HUB_CALL.finditer(text)]
    return out


@dataclass
class StartProblem:
    what: str
    #: the word that shows it (to tell ENTRYPOINT from CMD), and its line in the text
    token: str
    line: int


def offline(env: Mapping[str, str]) -> bool:
    return any(env.get(k, "").lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _script_offline(text: str) -> bool:
    return (
        re.search(r"\b(HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE)=[\"']?(1|true|yes|on)\b", text, re.I)
        is not None
    )


_VAR = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


def _hub_ids(cmd: SimpleCommand, env: Mapping[str, str]) -> list[str]:
    ids: list[str] = []
    argv = cmd.argv
    if cmd.name == "vllm" and len(argv) > 2 and argv[1] == "serve":
        ids.append(argv[2])
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if name in _MODEL_OPTS:
            ids.append(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
    values = []
    for x in ids:
        m = _VAR.match(x)
        values.append(env.get(m.group(1), "") if m else x)
    return [x for x in values if _HUB_ID.match(x) and not x.startswith((".", "/"))]


def _command_problem(cmd: SimpleCommand) -> tuple[str, str] | None:
    pair = _pair(cmd)
    if pair in _INSTALLERS:
        return f"installs packages at start (`{' '.join(cmd.argv[:2])}`)", cmd.argv[0]
    if pair in _FETCHERS:
        return f"downloads at start (`{' '.join(cmd.argv[:2])}`)", cmd.argv[1]
    if cmd.name in {"curl", "wget"}:
        remote = [u for u in urls(cmd.argv) if not is_loopback(u)]
        if remote:
            return f"downloads {remote[0]} at start", remote[0]
    return None


def start_problems(text: str, env: Mapping[str, str]) -> list[StartProblem]:
    """Downloads and installs that *text* (a start command or script) does at start.

    *env* is the image's ENV (with ``HF_HUB_OFFLINE=1`` hub model ids are local).
    """
    out: list[StartProblem] = []
    is_offline = offline(env) or _script_offline(text)
    for cmd in commands(text):
        found = _command_problem(cmd)
        if found:
            out.append(StartProblem(found[0], found[1], cmd.line))
            continue
        if is_offline or offline(cmd.env):
            continue
        for model in _hub_ids(cmd, {**env, **cmd.env}):
            out.append(
                StartProblem(
                    f"passes the hub model id {model!r} to `{cmd.name}`, which downloads it "
                    "at start unless HF_HUB_OFFLINE=1",
                    model,
                    cmd.line,
                )
            )
    if not is_offline:
        for n, line in enumerate(text.splitlines(), start=1):
            m = _START_HUB_CALL.search(line)
            if m and not line.lstrip().startswith("#"):
                out.append(
                    StartProblem(f"downloads from a hub at start ({m.group(1)})", m.group(1), n)
                )
    return out
