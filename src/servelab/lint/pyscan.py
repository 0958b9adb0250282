"""What one Python module does with model hubs, and when: read with Python's own parser.

:func:`scan` parses a module into its syntax tree (the built-in ``_ast`` node classes and
``compile(..., PyCF_ONLY_AST)``, which is what :func:`ast.parse` does, without importing
:mod:`ast` and the ``contextlib``/``enum`` it pulls in: about 15 ms of lint's start). This
module is imported only when lint actually follows a Python file, so ``servelab lint`` of a
plain Dockerfile never pays for it. It returns a :class:`Module`: its imports, its functions
and the hub loads and calls in each, which functions run at start (module level,
``if __name__ == "__main__"``, lifespan and startup hooks) and which at a request (route
handlers, Gradio callbacks).
:mod:`servelab.lint.follow` joins the modules of an application and decides what runs.

Only code counts: a call in a comment or a string is never seen.
"""

from __future__ import annotations

import _ast as ast
import posixpath
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from servelab.lint import catalogue
from servelab.lint.lazyre import LazyPattern

#: calls that always fetch from a hub (unless told to stay local)
_FETCH_CALLS = frozenset({"snapshot_download", "hf_hub_download"})
#: calls that fetch the model they are given when it is a hub id
_MODEL_CALLS = frozenset({"from_pretrained", "SentenceTransformer", "CrossEncoder", "pipeline"})
#: keywords that name the model of a load
_MODEL_KWARGS = ("pretrained_model_name_or_path", "model_name_or_path", "model", "model_name",
                 "model_id", "repo_id")
#: decorators (``@app.get(...)``, ``@router.post``, ``@bp.route``) of request handlers
_ROUTE_DECORATORS = frozenset({"get", "post", "put", "delete", "patch", "head", "options",
                               "route", "websocket", "api_route", "api_view", "view"})
#: UI callbacks: ``gr.Interface(fn=predict)``, ``button.click(fn=...)``
_CALLBACK_CALLS = frozenset({"Interface", "ChatInterface", "click", "submit", "change",
                             "add_api_route", "add_url_rule"})
#: packages whose bare pipeline()/SentenceTransformer()/snapshot_download() fetch models
_HUB_LIBRARIES = frozenset({"transformers", "sentence_transformers", "huggingface_hub",
                            "optimum", "diffusers", "modelscope", "setfit", "peft",
                            "faster_whisper", "ctranslate2", "gliner", "span_marker"}
                           | catalogue.PY_LIBRARIES)
#: the catalogue's calls that fetch whatever they are given, by their last name
_CATALOGUE_FETCH = frozenset(c.rsplit(".", 1)[-1] for c in catalogue.PY_FETCH_CALLS)
#: names of environment variables that hold a path, not a model id
_PATH_VAR = LazyPattern(r"PATH|DIR|FOLDER|LOCAL|FILE|ROOT|HOME|CACHE", re.I)
#: calls that run the function they are given, there and then: ``fire.Fire(main)``
_RUNNERS = frozenset({"fire.Fire", "Fire", "typer.run", "jsonargparse.CLI", "CLI",
                      "asyncio.run", "anyio.run", "trio.run"})
#: fields of compound statements that hold statements
_BODIES = ("body", "orelse", "finalbody", "handlers")
_HUB_ID = LazyPattern(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_NOT_HUB_FIRST = frozenset({"models", "model", "weights", "checkpoints", "data", "cache"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_OFFLINE_VARS = frozenset({"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"})

#: catalogue calls that, written bare, fetch only when imported from their library
_BARE_CATALOGUE = frozenset({"download_model", "WhisperModel", "create_model", "download",
                             "urlretrieve", "download_url_to_file", "load_state_dict_from_url",
                             "create_model_and_transforms", "get_file", "KerasLayer", "pull"})

START = "start"
REQUEST = "request"


class Load(NamedTuple):
    """A hub load (``from_pretrained('org/m')``) or a package install (``pip install`` run
    by ``subprocess``), and its line."""

    what: str
    line: int
    #: INSTALL for a package install, else a hub load
    kind: str = "hub"


INSTALL = "install"
#: a hub load that runs only when a file check fails (``if not os.path.exists(p):``, or
#: after ``if files_ok(...): return``): a first-start download
FIRST_START = catalogue.FIRST_START
#: calls that check a file or cache is in place
_EXISTS = LazyPattern(r"exist|isfile|isdir|is_file|is_dir|_ok$|present|cached|downloaded",
                      re.I)


class Call(NamedTuple):
    """A call of a name that may be a function of the application: ``load_model``,
    ``model.load``, ``Predictor`` (a class: its ``__init__``)."""

    name: str
    line: int


class Scope:
    """A function (or the module level): its loads, the calls it makes, what it imports."""

    __slots__ = ("calls", "imports", "line", "loads", "name")

    def __init__(self, name: str, line: int) -> None:
        self.name = name
        self.line = line
        self.loads: list[Load] = []
        self.calls: list[Call] = []
        #: (module, level, names) imported inside this scope
        self.imports: list[tuple[str, int, list[tuple[str, str]]]] = []


class Module:
    """What :func:`scan` found in one module."""

    __slots__ = ("aliases", "functions", "hooks", "main", "offline", "top")

    def __init__(self) -> None:
        self.top = Scope("<module>", 1)
        self.main = Scope("__main__", 1)
        #: "name" or "Class.method" -> its scope
        self.functions: dict[str, Scope] = {}
        #: function name -> START (lifespan, startup hook) or REQUEST (route, callback)
        self.hooks: dict[str, tuple[str, str]] = {}
        #: local name -> (module, name or "" for the module itself, level)
        self.aliases: dict[str, tuple[str, str, int]] = {}
        #: the module sets HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE itself
        self.offline = False


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


EnvLookup = Callable[[str], "str | None"]


class _Values:
    """Literal values of expressions: strings, module constants, ``os.getenv("X", "d")``
    (the image's ENV first), ``os.path.join``, f-strings with known parts."""

    def __init__(self, env: EnvLookup) -> None:
        self.env = env
        self.consts: dict[str, str] = {}
        #: names assigned from an environment variable of unknown value -> the variable
        self.env_vars: dict[str, str] = {}

    def of(self, node: ast.AST | None, depth: int = 0) -> str | None:
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = [self.of(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1)
                     for v in node.values]
            known = [p for p in parts if p is not None]
            return "".join(known) if len(known) == len(parts) else _prefix(parts)
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
            name = self.of(node.slice, depth + 1)
            return self.env(name) if name else None
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            for v in node.values:
                got = self.of(v, depth + 1)
                if got:
                    return got
        return None

    def env_name(self, node: ast.AST | None) -> str | None:
        """The variable an expression reads from the environment when its value is unknown
        (``os.environ["MODEL_ID"]``, ``os.getenv("MODEL_ID")`` with no default), else None."""
        if isinstance(node, ast.Name):
            return self.env_vars.get(node.id)
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
            name = self.of(node.slice)
            return name if name and self.env(name) is None else None
        if isinstance(node, ast.Call) and node.args and _dotted(node.func) in {
                "os.getenv", "os.environ.get", "getenv", "environ.get"}:
            name = self.of(node.args[0])
            has_default = len(node.args) > 1 or _kwarg(node, "default") is not None
            return name if name and self.env(name) is None and not has_default else None
        return None

    def _call(self, node: ast.Call, depth: int) -> str | None:
        name = _dotted(node.func)
        if name in {"os.getenv", "os.environ.get", "getenv", "environ.get"} and node.args:
            var = self.of(node.args[0], depth + 1)
            found = self.env(var) if var else None
            if found is not None:
                return found
            default = node.args[1] if len(node.args) > 1 else _kwarg(node, "default")
            return self.of(default, depth + 1)
        if name in {"os.path.join", "posixpath.join", "path.join"} and node.args:
            parts = [self.of(a, depth + 1) for a in node.args]
            if parts[0] is not None and all(p is not None for p in parts):
                return posixpath.join(*[p for p in parts if p is not None])
            return parts[0] + "/" if parts[0] else None
        if name in {"Path", "pathlib.Path"} and node.args:
            return self.of(node.args[0], depth + 1)
        return None


def _prefix(parts: list[str | None]) -> str | None:
    """The known start of an f-string (``f"/models/{name}"`` -> ``/models/``)."""
    out = []
    for p in parts:
        if p is None:
            break
        out.append(p)
    return "".join(out) or None


def _kwarg(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def local_value(value: str) -> bool:
    """Whether a model argument names a local path, not a hub id."""
    return value.startswith(("/", "./", "../", "~", "file:"))


def hub_id(value: str) -> bool:
    """``org/name`` and not a relative folder (``models/llama``) or file."""
    if local_value(value) or not _HUB_ID.match(value):
        return False
    first, name = value.split("/", 1)
    return first.lower() not in _NOT_HUB_FIRST and not name.lower().endswith(
        (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".ckpt", ".json"))


def _truthy(node: ast.AST | None) -> bool | None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return node.value
        if isinstance(node.value, str):
            return node.value.lower() in _TRUE
    return None


def _load(node: ast.Call, values: _Values, real: str = "") -> Load | None:
    """The hub load *node* is, or None (a local path, ``local_files_only=True``, a model
    id that is not a literal hub id, a config or tokenizer of a local path...). *real* is
    the called name with an import alias resolved (``AutoTokenizer.from_pretrained`` of
    ``T.from_pretrained`` after ``from transformers import AutoTokenizer as T``)."""
    name = real or _dotted(node.func)
    last = name.rsplit(".", 1)[-1]
    stays = _kwarg(node, "local_files_only")
    if stays is not None and _truthy(stays) is not False:
        return None  # True, or a variable: the code decides to stay local
    if last == "Repository" and _kwarg(node, "clone_from") is not None:
        return Load(f"Repository(clone_from={_shown(_kwarg(node, 'clone_from'), values)})",
                    node.lineno)
    if name.endswith("hub.load"):
        source = values.of(_kwarg(node, "source"))
        return None if source == "local" else Load("torch.hub.load()", node.lineno)
    found = _catalogue_load(node, name, last, values)
    if found is not None:
        return found if isinstance(found, Load) else None
    if last in _FETCH_CALLS:
        repo = node.args[0] if node.args else _kwarg(node, "repo_id")
        value = values.of(repo)
        if value is not None and local_value(value):
            return None
        return Load(f"{last}({_shown(repo, values)})", node.lineno)
    if last not in _MODEL_CALLS:
        return None
    if last == "from_pretrained" and "." not in name:
        return None  # a function of the application named from_pretrained
    arg = _model_arg(node, last)
    value = values.of(arg)
    if last == "pipeline" and arg is None:
        return Load(f"pipeline({_shown(node.args[0] if node.args else None, values)}) "
                    "with no model (the task's default model)", node.lineno)
    call = name if last == "from_pretrained" else last
    var = values.env_name(arg) if value is None else None
    if var is not None and not _PATH_VAR.search(var) and not _NOT_WEIGHTS_CALL.search(name):
        return Load(f"{call}(the model id in ${var}, which the image does not set)",
                    node.lineno)
    if value is None or not hub_id(value):
        return None
    return Load(f"{call}({value!r})", node.lineno)


_NOT_WEIGHTS_CALL = LazyPattern(
    r"(Config|Tokenizer|TokenizerFast|Processor|FeatureExtractor|ImageProcessor)\.")
#: calls whose result is a response body: ``urlopen(url)``, ``requests.get(url)``
_STREAMS = frozenset({"urlopen", "get"})
#: cloud SDK downloads, whose first argument is a bucket or a destination, never local
_TO_FILE = frozenset({"download_file", "download_fileobj", "download_to_filename"})
_LOOPBACK_URL = LazyPattern(r"^(https?|ftp)://(localhost|127\.0\.0\.1|\[::1\])[:/]")


def _catalogue_load(node: ast.Call, name: str, last: str, values: _Values) -> Load | str | None:
    """A fetch of :mod:`servelab.lint.catalogue`'s Python forms beyond the hub client: a
    :class:`Load`, "" for a form that stays local, None for a call that is none of them."""
    for form in (_fetch_call, _stream_call, _named_model, _pretrained):
        found = form(node, name, last, values)
        if found is not None:
            return found
    return None


def _fetch_call(node: ast.Call, name: str, last: str, values: _Values) -> Load | str | None:
    """``download_url_to_file(url, ...)``, ``nltk.download("punkt")``, boto3's
    ``s3.download_file(...)``, ``blob.download_to_filename(...)``, ``urlretrieve(url)``."""
    first = node.args[0] if node.args else None
    if name in {"torch.utils.model_zoo.load_url", "model_zoo.load_url"}:
        return Load(f"{name}({_shown(first, values)})", node.lineno)
    if last not in _CATALOGUE_FETCH or last in _FETCH_CALLS or last == "load":
        return None
    if last == "get_file":  # keras.utils.get_file(fname, origin=url)
        first = _kwarg(node, "origin") or (node.args[1] if len(node.args) > 1 else None)
    dotted = "." in name  # a bare name passed library_call: imported from the library
    if dotted and last == "download" and not name.startswith(("nltk", "gdown", "spacy", "cli")):
        return None
    if dotted and ((last == "pull" and not name.startswith("ollama")) or (
            last == "get_file" and "keras" not in name and "utils" not in name)):
        return None
    if last == "download_model" and "." in name and not name.startswith("faster_whisper"):
        return None
    if last in {"download_file", "download_fileobj"} and "." not in name:
        return None  # boto3's are methods: s3.download_file(bucket, key, path)
    value = values.of(first) if last not in _TO_FILE else None
    if value is not None and (local_value(value) or _LOOPBACK_URL.match(value)):
        return ""
    return Load(f"{name}({_shown(first, values)})", node.lineno)


def _stream_call(node: ast.Call, name: str, last: str, values: _Values) -> Load | str | None:
    """``copyfileobj(urlopen(url), f)``, ``f.write(requests.get(url).content)``,
    ``requests.get(url, stream=True)``, ``httpx.stream("GET", url)``."""
    first = node.args[0] if node.args else None
    if last == "copyfileobj" or (last == "write" and "." in name):
        source = next((a for a in node.args if isinstance(a, ast.Call)
                       and _dotted(a.func).rsplit(".", 1)[-1] in _STREAMS), None)
        if source is None:
            return None
        url = _shown(source.args[0] if source.args else None, values)
        return Load(f"{_dotted(source.func)}({url}) written to a file", node.lineno)
    if (last == "stream" and name.startswith("httpx")) or (
            last == "get" and name.startswith(("requests", "httpx"))
            and _truthy(_kwarg(node, "stream")) is True):
        known = values.of(first)
        if known is not None and _LOOPBACK_URL.match(known):
            return ""
        return Load(f"{name}({_shown(first, values)}) streamed", node.lineno)
    return None


def _named_model(node: ast.Call, name: str, last: str, values: _Values) -> Load | str | None:
    """``WhisperModel("large-v3")``, ``whisper.load_model("base")``, ``EasyNMT("opus-mt")``:
    a size or a model name is fetched too; a local path, or ``local_files_only=True``, stays
    local."""
    if last not in {"WhisperModel", "EasyNMT"} and not name.endswith("whisper.load_model"):
        return None
    arg = node.args[0] if node.args else (_kwarg(node, "model_size_or_path")
                                          or _kwarg(node, "name") or _kwarg(node, "model_name"))
    value = values.of(arg)
    if _truthy(_kwarg(node, "local_files_only")) or (value is not None and local_value(value)):
        return ""
    if value is None and values.env_name(arg) is None:
        return ""
    return Load(f"{name}({_shown(arg, values)})", node.lineno)


def _pretrained(node: ast.Call, name: str, last: str, values: _Values) -> Load | str | None:
    """``timm.create_model(..., pretrained=True)``, ``torchvision.models.x(weights=...)``,
    ``open_clip.create_model_and_transforms(arch, pretrained="laion2b_...")``."""
    if last == "create_model_and_transforms" or (last == "create_model"
                                                 and name.startswith("open_clip")):
        tag = _kwarg(node, "pretrained") or (node.args[1] if len(node.args) > 1 else None)
        value = values.of(tag)
        fetches = tag is not None and not (value is not None and (not value
                                                                  or local_value(value)))
        return Load(f"{name}(pretrained weights)", node.lineno) if fetches else ""
    if last != "create_model" and not name.startswith(("torchvision.models.", "models.")):
        return None
    if last == "create_model" and not name.startswith("timm") and "." in name:
        return None
    weights = _kwarg(node, "weights")
    fetches = _truthy(_kwarg(node, "pretrained")) is True or (
        weights is not None and not (isinstance(weights, ast.Constant)
                                     and weights.value is None))
    return Load(f"{name}(pretrained weights)", node.lineno) if fetches else ""


#: calls that run a command (by their last name: ``subprocess.check_call``,
#: ``os.system``, ``check_call`` imported from subprocess); the command must hold an
#: install (``pip install``, ``apt-get install`` ...), so other commands never count
_RUN_CALLS = frozenset({"run", "call", "check_call", "check_output", "Popen", "system",
                        "popen", "getoutput", "getstatusoutput"})
#: calls given pip's arguments: A1111's ``launch.run_pip("install x", "x")``, ``pip.main``
_PIP_CALLS = frozenset({"run_pip", "pipmain"})
_INSTALL_PAIRS = frozenset({("pip", "install"), ("pip3", "install"), ("apt-get", "install"),
                            ("apt", "install"), ("conda", "install"), ("mamba", "install"),
                            ("npm", "install"), ("apk", "add"), ("uv", "pip")})


def _install(node: ast.Call, values: _Values) -> Load | None:
    """A package install a call runs: ``subprocess.check_call([sys.executable, "-m",
    "pip", "install", "x"])``, ``os.system("pip install x")``, ``run_pip("install x")``."""
    name = _dotted(node.func)
    last = name.rsplit(".", 1)[-1]
    if not node.args:
        return None
    if last in _PIP_CALLS or name == "pip.main":
        words = ["pip", *_words(node.args[0], values)]
    elif last in _RUN_CALLS:
        words = _words(node.args[0], values)
    else:
        return None
    for i in range(len(words) - 1):
        program = words[i].rsplit("/", 1)[-1]
        if (program, words[i + 1]) in _INSTALL_PAIRS:
            return Load(f"{program} {words[i + 1]} ({name})", node.lineno, INSTALL)
    return None


def _words(arg: ast.expr, values: _Values) -> list[str]:
    """The words of a command given as a list (unknown items as ``?``) or a string."""
    if isinstance(arg, ast.List | ast.Tuple):
        return [values.of(e) or "?" for e in arg.elts]
    text = values.of(arg)
    return text.split() if text else []


def _model_arg(node: ast.Call, last: str) -> ast.expr | None:
    if last == "pipeline":
        if len(node.args) > 1:
            return node.args[1]
        model = _kwarg(node, "model")
        if model is None and node.args and not _kwarg(node, "task"):
            first = node.args[0]  # pipeline("org/name") is not a task
            return first if isinstance(first, ast.Constant) and "/" in str(first.value) else None
        return model
    if node.args:
        return node.args[0]
    return next((v for k in _MODEL_KWARGS if (v := _kwarg(node, k)) is not None), None)


def _shown(node: ast.AST | None, values: _Values) -> str:
    if node is None:
        return ""
    value = values.of(node)
    if value is not None:
        return repr(value)
    text = _dotted(node)
    return text or "..."


def _sets_offline(node: ast.AST) -> bool:
    """``os.environ["HF_HUB_OFFLINE"] = "1"``, ``os.environ.setdefault("HF_HUB_OFFLINE",
    "1")``, ``os.environ.update(HF_HUB_OFFLINE="1")``."""
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if (isinstance(t, ast.Subscript) and _dotted(t.value) == "os.environ"
                    and isinstance(t.slice, ast.Constant) and t.slice.value in _OFFLINE_VARS):
                return bool(_truthy(node.value))
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name in {"os.environ.setdefault", "os.putenv"} and len(node.args) == 2:
            first = node.args[0]
            return (isinstance(first, ast.Constant) and first.value in _OFFLINE_VARS
                    and bool(_truthy(node.args[1])))
        if name == "os.environ.update":
            return any(k.arg in _OFFLINE_VARS and _truthy(k.value) for k in node.keywords)
    return False


def _with_download(node: ast.With | ast.AsyncWith) -> Load | None:
    """``with urlopen(url) as r, open(p, "wb") as f:`` (or ``requests.get(url,
    stream=True)``, ``httpx.stream(...)``): a response body written to a file."""
    calls = [i.context_expr for i in node.items if isinstance(i.context_expr, ast.Call)]
    names = [_dotted(c.func) for c in calls]
    writes = any(n == "open" and any(isinstance(a, ast.Constant) and "w" in str(a.value)
                                     for a in c.args[1:2]) for n, c in zip(names, calls,
                                                                           strict=True))
    source = next((n for n in names if n.rsplit(".", 1)[-1] == "urlopen"
                   or n in {"httpx.stream", "requests.get", "httpx.get"}), None)
    if source is None or not writes:
        return None
    return Load(f"{source}() written to a file", node.lineno)


def _file_check(test: ast.expr) -> bool | None:
    """True for ``not exists(p)`` (the body runs when the file is missing), False for
    ``exists(p)`` (its else runs then), None for a test that checks no file."""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negated, test = not negated, test.operand
    if isinstance(test, ast.BoolOp):
        found = [_file_check(v) for v in test.values]
        if any(f is None for f in found) or len(set(found)) != 1:
            return None
        return found[0] != negated
    if isinstance(test, ast.Call) and _EXISTS.search(_dotted(test.func).rsplit(".", 1)[-1]):
        return negated
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    names = {_dotted(p) for p in parts} | {getattr(p, "value", None) for p in parts}
    return "__name__" in names and "__main__" in names


class _Scanner:
    def __init__(self, env: EnvLookup) -> None:
        self.mod = Module()
        self.values = _Values(env)
        #: inside a branch that runs only when a file check fails
        self.guarded = False

    def module(self, tree: ast.Module) -> Module:
        for node in tree.body:
            if isinstance(node, ast.If) and _is_main_guard(node):
                for sub in node.body:
                    self.statement(sub, self.mod.main, "")
            else:
                self.statement(node, self.mod.top, "")
        return self.mod

    def statement(self, node: ast.stmt, scope: Scope, owner: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.function(node, owner)
            return
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                self.statement(sub, scope, node.name)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            self.imports(node, scope)
        if _sets_offline(node):
            self.mod.offline = True
        self.assignment(node)
        if not self.compound(node, scope, owner):
            self.expressions(node, scope)

    def assignment(self, node: ast.stmt) -> None:
        """``NAME = <known string>``: later loads in this scope see the value;
        ``for NAME in ["org/a", "org/b"]``: loads in the loop see the first hub id;
        ``NAME = os.environ["MODEL_ID"]`` of an unknown value: loads name the variable."""
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            value = self.values.of(node.value)
            if value is not None:
                self.values.consts[node.targets[0].id] = value
            elif (var := self.values.env_name(node.value)) is not None:
                self.values.env_vars[node.targets[0].id] = var
        elif isinstance(node, ast.For | ast.AsyncFor) and isinstance(node.target, ast.Name) \
                and isinstance(node.iter, ast.List | ast.Tuple):
            items = [self.values.of(e) for e in node.iter.elts]
            hub = [v for v in items if v is not None and hub_id(v)]
            if hub:
                self.values.consts[node.target.id] = hub[0]

    def compound(self, node: ast.stmt, scope: Scope, owner: str) -> bool:
        """An ``if``/``for``/``with``/``try``: its header's calls, then its bodies statement
        by statement (so imports and functions inside them count); False for others."""
        bodies = [f for f in _BODIES if getattr(node, f, None)]
        if not bodies:
            return False
        for name in node._fields:  # the header: `if test:`, `for x in it:`, `with cm:`
            value = getattr(node, name, None)
            if name not in _BODIES and isinstance(value, ast.AST):
                self.expressions(value, scope)
        if isinstance(node, ast.With | ast.AsyncWith) and (found := _with_download(node)):
            scope.loads.append(found._replace(kind=FIRST_START) if self.guarded else found)
        check = _file_check(node.test) if isinstance(node, ast.If) else None
        saved = self.guarded
        for f in bodies:  # the bodies, statement by statement (imports and defs in them)
            # `if not exists(p):` guards its body, `if exists(p): ... else:` its else
            if check is not None:
                self.guarded = saved or (check if f == "body" else not check)
            for sub in getattr(node, f):
                inner = sub.body if isinstance(sub, ast.ExceptHandler) else [sub]
                for stmt in inner:
                    self.statement(stmt, scope, owner)
        self.guarded = saved
        if check is False and isinstance(node, ast.If) and isinstance(
                node.body[-1], ast.Return | ast.Continue | ast.Raise):
            self.guarded = True  # `if files_ok(p): return`: what follows runs when missing
        return True

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str) -> None:
        guarded, self.guarded = self.guarded, False
        try:
            self._function(node, owner)
        finally:
            self.guarded = guarded

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str) -> None:
        qual = f"{owner}.{node.name}" if owner else node.name
        scope = Scope(qual, node.lineno)
        self.mod.functions[qual] = scope
        for dec in node.decorator_list:
            self.decorator(dec, qual)
        saved = self.values.consts
        self.values.consts = {**saved, **self.defaults(node.args)}
        for sub in node.body:
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                self.function(sub, qual)  # nested: its decorators run with its parent
                for dec in sub.decorator_list:
                    self.expressions(dec, scope)
            else:
                self.statement(sub, scope, owner)
        self.values.consts = saved

    def defaults(self, args: ast.arguments) -> dict[str, str]:
        """Parameters whose default is a known string: ``def main(base_model="org/m")``
        (a command-line entry point such as ``fire.Fire(main)`` runs with it)."""
        out = {}
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults,
                         strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                  if d is not None]
        for arg, default in pairs:
            value = self.values.of(default)
            if value is not None:
                out[arg.arg] = value
        return out

    def decorator(self, dec: ast.expr, qual: str) -> None:
        name = _dotted(dec)
        last = name.rsplit(".", 1)[-1]
        if last == "on_event" and isinstance(dec, ast.Call) and dec.args:
            event = self.values.of(dec.args[0])
            if event == "startup":
                self.mod.hooks[qual] = (START, "startup hook")
        elif last in _ROUTE_DECORATORS and "." in name:
            self.mod.hooks.setdefault(qual, (REQUEST, "route handler"))

    def imports(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                scope.imports.append((a.name, 0, []))
                local = a.asname or a.name.split(".", 1)[0]
                self.mod.aliases.setdefault(local, (a.name if a.asname else local, "", 0))
            return
        names = [(a.name, a.asname or a.name) for a in node.names]
        scope.imports.append((node.module or "", node.level, names))
        for name, local in names:
            self.mod.aliases[local] = (node.module or "", name, node.level)

    def expressions(self, node: ast.AST, scope: Scope) -> None:
        for sub in _walk_calls(node):
            load = (_load(sub, self.values, self.resolved(sub)) if self.library_call(sub)
                    else None) or _install(sub, self.values)
            if load is not None:
                scope.loads.append(load._replace(kind=FIRST_START) if self.guarded
                                   and load.kind != INSTALL else load)
                continue
            name = _dotted(sub.func)
            if name:
                scope.calls.append(Call(name, sub.lineno))
            if name in _RUNNERS and sub.args and isinstance(sub.args[0], ast.Name | ast.Attribute):
                scope.calls.append(Call(_dotted(sub.args[0]), sub.lineno))
            self.served(sub, name, scope)
            self.hook_arguments(sub)
            if _sets_offline(sub):
                self.mod.offline = True

    def resolved(self, call: ast.Call) -> str:
        """The name *call* calls, its first word resolved when it is an alias of a hub
        library's module or name (``import transformers as tf``: ``tf.AutoModel`` is
        ``transformers.AutoModel``; ``from transformers import AutoTokenizer as T``: ``T``
        is ``AutoTokenizer``), so a tokenizer or config load under an alias is still told
        from a weights load. Other names stay as written."""
        name = _dotted(call.func)
        first, dot, rest = name.partition(".")
        alias = self.mod.aliases.get(first)
        if alias is None or alias[2] or alias[0].split(".", 1)[0] not in _HUB_LIBRARIES:
            return name
        module, attr, _level = alias
        real = attr or module
        return f"{real}{dot}{rest}" if real != first else name

    def library_call(self, call: ast.Call) -> bool:
        """Whether a bare ``pipeline(...)``/``SentenceTransformer(...)`` is the library's,
        not a function of the application's own (``def pipeline(...)``, or one imported
        from the application's modules)."""
        name = _dotted(call.func)
        if "." in name or name not in _MODEL_CALLS | _FETCH_CALLS | _BARE_CATALOGUE:
            return True
        alias = self.mod.aliases.get(name)
        if alias is None:
            return name not in self.mod.functions
        module, _attr, level = alias
        return not level and module.split(".", 1)[0] in _HUB_LIBRARIES

    def served(self, call: ast.Call, name: str, scope: Scope) -> None:
        """``uvicorn.run("app.server:app")``: the server imports that module (and calls the
        factory with ``factory=True``) when this call runs."""
        if name not in {"uvicorn.run", "hypercorn.run"}:
            return
        spec = self.values.of(call.args[0] if call.args else _kwarg(call, "app"))
        module, colon, attr = (spec or "").partition(":")
        if not colon or not module.replace(".", "").replace("_", "").isalnum():
            return
        scope.imports.append((module, 0, []))
        if _truthy(_kwarg(call, "factory")):
            scope.calls.append(Call(f"{module}.{attr.removesuffix('()')}", call.lineno))
            self.mod.aliases.setdefault(module.split(".", 1)[0],
                                        (module.split(".", 1)[0], "", 0))

    def hook_arguments(self, call: ast.Call) -> None:
        """``FastAPI(lifespan=f)``, ``add_event_handler("startup", f)``,
        ``on_startup=[f]``, ``gr.Interface(fn=f)``, ``btn.click(f, ...)``."""
        last = _dotted(call.func).rsplit(".", 1)[-1]
        for k in call.keywords:
            if k.arg == "lifespan":
                self._hook(k.value, START, "lifespan hook")
            elif k.arg == "on_startup" and isinstance(k.value, ast.List | ast.Tuple):
                for e in k.value.elts:
                    self._hook(e, START, "startup hook")
            elif k.arg in {"fn", "endpoint", "view_func"} and last in _CALLBACK_CALLS:
                self._hook(k.value, REQUEST, "request callback")
        if last == "add_event_handler" and len(call.args) == 2:
            if self.values.of(call.args[0]) == "startup":
                self._hook(call.args[1], START, "startup hook")
        elif (last in {"click", "submit", "change", "Interface", "ChatInterface"}
              and call.args and isinstance(call.args[0], ast.Name)):
            self._hook(call.args[0], REQUEST, "request callback")

    def _hook(self, node: ast.expr, when: str, kind: str) -> None:
        name = _dotted(node)
        if name:
            self.mod.hooks.setdefault(name, (when, kind))


def _walk_calls(node: ast.AST) -> Iterator[ast.Call]:
    """Calls in *node*, not descending into nested functions, lambdas or classes."""
    todo = [node]
    while todo:
        cur = todo.pop()
        for child in _children(cur):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                          | ast.Lambda):
                continue
            todo.append(child)
        if isinstance(cur, ast.Call):
            yield cur


def _children(node: ast.AST) -> Iterator[ast.AST]:
    """The direct child nodes of *node* (:func:`ast.iter_child_nodes`)."""
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.AST))


def scan(text: str, env: EnvLookup) -> Module | None:
    """The facts of the Python module *text*, or None when it does not parse (a template,
    Python 2): nothing is claimed about code that was not read."""
    try:
        tree = compile(text, "<module>", "exec", ast.PyCF_ONLY_AST)
        if not isinstance(tree, ast.Module):
            return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return _Scanner(env).module(tree)
    except RecursionError:
        return None
