"""Recognise model weights in paths, weight downloads in build steps, and downloads or
installs in a start command or start script."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from servelab.lint import catalogue, unpack
from servelab.lint.lazyre import LazyPattern
from servelab.lint.saves import URL, saved, urls
from servelab.lint.shell import UNREAD, SimpleCommand, commands, shown
from servelab.textio import head_of

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
    ".mar",  # a TorchServe model archive: the weights zipped with their handler
    ".llamafile",  # llamafile: the server binary with the GGUF weights inside
)
WEIGHT_DIRS = frozenset({"models", "weights", "checkpoints"})
_BIN_NAME = LazyPattern(r"^(pytorch_model|adapter_model|model|consolidated)[\w.-]*\.bin$", re.I)
_URL = URL
_LOOPBACK = {"localhost", "127.0.0.1", "0.0.0.0", "[::1]", "::1"}  # noqa: S104
#: the hub's model and LFS hosts (not cdn-media.huggingface.co, which serves site assets and
#: tools such as gradio's frpc binary), or a ``/resolve/<revision>/`` file URL
HUB_URL = LazyPattern(
    r"//(?:www\.|cdn-lfs[\w.-]*\.)?(?:huggingface\.co|hf\.co)/|/resolve/[^/]+/", re.I)
_HUB_CALL = LazyPattern(
    r"\b(snapshot_download|hf_hub_download|torch\.hub\.load(_state_dict_from_url)?|"
    r"load_state_dict_from_url|(?:faster_whisper\.)?download_model|whisper\.load_model|"
    r"from_pretrained|SentenceTransformer|CrossEncoder|WhisperModel|EasyNMT)\s*\(",
)


def _call_pattern(names: tuple[str, ...]) -> str:
    return "|".join(n.replace(".", r"\.") for n in sorted(names, key=len, reverse=True))


#: the catalogue's Python calls that fetch whatever they are given, in a script's text
_START_HUB_CALL = LazyPattern(
    rf"\b({_call_pattern(catalogue.PY_FETCH_CALLS)}|download_model)\s*\(")
#: the catalogue's named-model loads (``WhisperModel("large-v3")``, ``whisper.load_model``)
#: and pretrained vision models, in a script's text
_START_NAMED_LOAD = LazyPattern(
    rf"\b({_call_pattern(catalogue.PY_NAMED_MODEL_CALLS)})\(\s*(?:model_size_or_path\s*=\s*|"
    r"name\s*=\s*|model_name\s*=\s*)?[rf]?[\"']([^\"'/.~][^\"']*)[\"']|"
    r"\b(timm\.create_model|torchvision\.models\.[\w.]+|models\.\w+)\([^)]*\b"
    r"(pretrained\s*=\s*True|weights\s*=\s*(?!None\b)[\w.\"'])")
#: a file streamed from the network: ``requests.get(url, stream=True)``, ``httpx.stream(``,
#: ``copyfileobj(urlopen(url), f)``
_START_STREAM = LazyPattern(
    r"\b((?:requests|httpx|session|client)\.(?:get|request)\([^)]*stream\s*=\s*True|"
    r"httpx\.stream\(|copyfileobj\(\s*(?:urllib\.request\.)?urlopen\(|"
    r"\.write\(\s*(?:urllib\.request\.)?urlopen\()")
_MODEL_OPTS = frozenset(
    {
        "--model",
        "--model-id",
        "--model_id",
        "--model-path",
        "--model-name-or-path",
        "--model_name_or_path",
        "--tokenizer",
        "--model-uri",
        "--model_uri",
        "--repo-id",
        "--repo_id",
    }
)
#: a program or ``python -m`` module whose job is to download (``app.downloader``,
#: ``model_downloader``, ``download-model``): given a hub id, it fetches it, offline or not
_DOWNLOADER = LazyPattern(r"(^|[._/-])(down)?load(er|ers)?([._-]|$)|download", re.I)
_HUB_ID = LazyPattern(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = {"1", "true", "yes", "on"}
#: (program, subcommand) of the package installers in :mod:`servelab.lint.catalogue`
_INSTALLERS = frozenset(c[:2] for f in catalogue.FETCHERS if f.name == "package installers"
                        for c in f.commands)
#: (program, subcommand) of the catalogue's hub, git and model-tool fetchers
_FETCHERS = frozenset(c[:2] for f in catalogue.FETCHERS
                      if f.name in {"Hugging Face Hub client", "git",
                                    "model tools that fetch the id they are given"}
                      for c in f.commands if len(c) >= 2)


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


#: archive and compressed-file endings (longest first where one ends another)
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz",
            ".tar.zst", ".zip", ".7z", ".gz", ".xz", ".bz2", ".zst")
#: words in an archive's name that say it packs a model (PaddlePaddle ships
#: ``*_infer.tar`` inference models, TF Hub and ONNX zoos ``*-model.tar.gz``)
_MODEL_WORDS = frozenset({"model", "models", "weights", "ckpt", "checkpoint", "checkpoints",
                          "infer", "inference"})
_WORD_SPLIT = LazyPattern(r"[-_.]+")


def is_model_archive(url: str) -> bool:
    """Whether a URL names an archive of a model: ``.../ch_ppocr_det_infer.tar``."""
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
    suffix = next((a for a in ARCHIVES if name.endswith(a)), None)
    if suffix is None:
        return False
    words = {w for w in _WORD_SPLIT.compiled.split(name[: -len(suffix)]) if w}
    return bool(words & _MODEL_WORDS)


#: below this, a file with a weight name but no weight header is a stub or a test fixture
MIN_WEIGHT_BYTES = 1024 * 1024
#: endings of files that hold model weights only when large (NumPy ``.npy``/``.npz`` arrays:
#: MTCNN's ``mtcnn_weights.npy``, exported embeddings tables), judged in the context by size
#: alone, never by the name of a path: a small ``mean.npy`` is statistics, not a model
SIZED_WEIGHT_EXT = (".npy", ".npz")
_HEADERS = (b"GGUF", b"ggml", b"ggjt", b"ggmf", b"ggla", b"lmgg")
_CONTAINER_HEADERS = (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05",
                      b"\x89HDF\r\n\x1a\n")


def _safetensors_header(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 0 < n < size and head[8:9] == b"{"


#: endings of source, text and config files: never opened when looking for weights
_NOT_WEIGHT_EXT = frozenset((
    ".py", ".pyi", ".pyc", ".pyx", ".pxd", ".go", ".rs", ".c", ".cc", ".cpp", ".cxx", ".h",
    ".hpp", ".cu", ".cuh", ".swift", ".java", ".kt", ".js", ".ts", ".jsx", ".tsx", ".mjs",
    ".rb", ".php", ".pl", ".sh", ".bash", ".zsh", ".ps1", ".bat", ".cmake", ".mk", ".md",
    ".rst", ".txt", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".conf",
    ".lock", ".proto", ".html", ".css", ".scss", ".svg", ".xml", ".csv", ".tsv", ".jinja",
    ".j2", ".tmpl", ".template", ".patch", ".diff", ".in", ".mod", ".sum", ".png", ".jpg",
    ".jpeg", ".gif", ".ico", ".webp", ".pdf",
))


def weight_file(path: Path) -> int | None:
    """The size of *path* when it holds model weights, else None.

    Judged by content, not only by name: a safetensors or GGUF/GGML header counts whatever
    the name; a weight name (``*.safetensors``, ``*.pt``, ``pytorch_model*.bin`` ...) counts
    with a matching container header (zip, pickle, HDF5, TFLite) or at 1 MiB and more; a
    NumPy array (``*.npy``, ``*.npz``) at 1 MiB and more.
    Source files in a ``models/`` folder (``*.py``, ``*.go``) never count.
    """
    if path.suffix.lower() in _NOT_WEIGHT_EXT:
        return None  # source and text files are never opened
    got = head_of(path, 16)  # a regular file only: a pipe would block, a device never end
    if got is None:
        return None
    size, head = got
    if head.startswith(_HEADERS) or _safetensors_header(head, size):
        return size
    name = path.name.lower()
    if name.endswith(SIZED_WEIGHT_EXT):  # NumPy arrays: weights at 1 MiB and more
        return size if size >= MIN_WEIGHT_BYTES else None
    named = name.endswith(WEIGHT_EXT) or bool(_BIN_NAME.match(name))
    if not named:
        return None
    if head.startswith(_CONTAINER_HEADERS) or head[4:8] == b"TFL3" or size >= MIN_WEIGHT_BYTES:
        return size
    return None


_FILE_ARG = LazyPattern(r"^[\w./-]*[\w-]\.([A-Za-z][A-Za-z0-9]{0,11})$")
_SCRIPT_EXT = frozenset({"py", "sh", "bash"})


def names_only_other_files(text: str) -> bool:
    """Whether the commands of *text* (a RUN that runs a downloading script) name files and
    every one is a config, tokenizer or text file: ``python cache_warmer.py config.json
    org/model`` fetches config.json, not weights. Scripts themselves are not counted."""
    named = []
    for cmd in commands(text):
        for word in cmd.argv[1:]:
            m = _FILE_ARG.match(word)
            if m and not _URL.match(word) and m.group(1).lower() not in _SCRIPT_EXT:
                named.append(word)
    return bool(named) and all(
        "." + w.rsplit(".", 1)[1].lower() in _NOT_WEIGHT_EXT and not is_weight_path(w)
        for w in named)


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def url_host(url: str) -> str:
    """The host name of *url*, lower-case ("" when it is no URL)."""
    m = _URL.match(url)
    return m.group(3).lower() if m else ""


def is_loopback(url: str) -> bool:
    m = _URL.match(url)
    return bool(m) and m is not None and m.group(3).lower() in _LOOPBACK


#: programs that download the URLs they are given (aria2c: a segmented downloader, often
#: used for model files: ``aria2c -x 16 URL -d /models -o model.gguf``)
HTTP_DOWNLOADERS = frozenset({"curl", "wget", "aria2c"})


def aria2_outputs(argv: list[str]) -> list[str]:
    """The file names an ``aria2c`` command saves to (``-o NAME``, ``--out=NAME``)."""
    out: list[str] = []
    for i, a in enumerate(argv[1:], start=1):
        if a in {"-o", "--out"} and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif a.startswith(("--out=", "-o")) and len(a) > 2 and a != "--out":
            out.append(a.partition("=")[2] if a.startswith("--") else a[2:])
    return out


def _pair(cmd: SimpleCommand) -> tuple[str, str]:
    args = [a for a in cmd.argv[1:] if not a.startswith("-")]
    return (cmd.name, args[0] if args else "")


#: tools that fetch the hub model they are given: converters and exporters (optimum-cli,
#: CTranslate2's converter, MLC), downloaders (litgpt download), llama.cpp's ``-hf``
_BUILD_MODEL_TOOLS = frozenset({"optimum-cli", "ct2-transformers-converter", "litgpt",
                                "mlc_llm", "llama-cli", "llama-server", "openllm"})


#: (program, subcommand) pairs that download a model: ``rembg d u2net`` fetches the u2net
#: ONNX model into ~/.u2net
_BUILD_PULLS = frozenset({("huggingface-cli", "download"), ("hf", "download"),
                          ("ollama", "pull"), ("rembg", "d")})
#: commands whose job is to fetch a model into a cache: NVIDIA NIM's ``download-to-cache``,
#: MinerU's ``mineru-models-download``
_BUILD_FETCHERS = frozenset({"download-to-cache", "mineru-models-download"})


#: model hubs whose downloads are models whatever the URL's name (TF Hub's
#: ``.../2?tf-hub-format=compressed``, its Google Cloud Storage mirror, Kaggle Models)
MODEL_HUB_URL = LazyPattern(
    r"//(?:www\.)?tfhub\.dev/|//storage\.googleapis\.com/tfhub-modules/|"
    r"//(?:www\.)?kaggle\.com/(?:api/v1/)?models/", re.I)
#: a Google Cloud Storage object with a model word in its path (``mediapipe-models``,
#: ``.../models/...``): a model when it is unpacked into a folder
_GCS_MODEL = LazyPattern(r"//storage\.googleapis\.com/[^?#]*\bmodels?\b", re.I)
#: folders an archive unpacked into makes a model store of: beside WEIGHT_DIRS, ``model/``,
#: a TorchServe model store and a Triton model repository
_MODEL_FOLDERS = WEIGHT_DIRS | {"model", "model-store", "model_store", "modelstore",
                                "model_repository", "model-repository", "model_repo",
                                "model-repo"}
_CACHE_FOLDERS = (".cache/huggingface", ".cache/torch")


def is_model_folder(path: str) -> bool:
    """Whether *path* is, or lies in, a folder models are kept in (``/models/x``,
    ``/app/model``, ``~/.cache/huggingface``)."""
    parts = {p.lower() for p in path.split("/") if p}
    return bool(parts & _MODEL_FOLDERS) or any(c in path for c in _CACHE_FOLDERS)


def _unpacked_models(cmds: list[SimpleCommand], seen: set[str]) -> list[str]:
    """Downloads unpacked (``tar -x``, ``unzip``, ``7z x``) into a model folder, or whose
    URL is a model hub's, or whose saved name says model (``-O model.tar.gz``): one phrase
    each. URLs already in *seen* are skipped. An archive of a tool or of source code
    unpacked elsewhere (``/usr/local``, ``/opt/src``) is not weights."""
    out: list[str] = []
    cwd = ""
    for i, cmd in enumerate(cmds):
        if cmd.name == "cd" and len(cmd.argv) > 1 and cmd.argv[1].startswith("/"):
            cwd = cmd.argv[1]
        if cmd.name not in HTTP_DOWNLOADERS:
            continue
        for url, dest in saved(cmd):
            if url in seen:
                continue
            into = unpack.unpacked_to(cmds, i, dest)
            if into is None:
                continue
            folder = into or cwd
            if (is_model_folder(folder) or MODEL_HUB_URL.search(url) or HUB_URL.search(url)
                    or _GCS_MODEL.search(url) or is_model_archive(dest or "")):
                where = f" into {folder}" if folder else ""
                out.append(f"{cmd.name} {url} unpacked{where}")
    return out


def build_weight_downloads(text: str) -> list[str]:
    """What in a RUN's text downloads model weights at build time (one phrase each)."""
    out: list[str] = []
    cmds = commands(text)
    for cmd in cmds:
        pair = _pair(cmd)
        if pair in _BUILD_PULLS:
            out.append(" ".join(cmd.argv[:2]))
        elif pair == ("git", "lfs") and "pull" in cmd.argv:
            out.append("git lfs pull")
        elif pair == ("docling-tools", "models") and "download" in cmd.argv:
            out.append("docling-tools models download")  # Docling's layout/OCR models
        elif pair == ("git", "clone") and any(HUB_URL.search(u) for u in urls(cmd.argv)):
            out.append("git clone of a model repository")
        elif cmd.name in HTTP_DOWNLOADERS:
            named = aria2_outputs(cmd.argv) if cmd.name == "aria2c" else []
            for u in urls(cmd.argv):
                if is_weight_path(u) or HUB_URL.search(u) or is_model_archive(u) or any(
                        is_weight_path(n) for n in named) or MODEL_HUB_URL.search(u):
                    out.append(f"{cmd.name} {u}")
        elif cmd.name in _BUILD_MODEL_TOOLS:
            out += [f"{cmd.name} {x}" for x in model_args(cmd) if is_hub_id(x)][:1]
        elif cmd.name in _BUILD_FETCHERS:
            out.append(cmd.name)
        elif (found := catalogue.command_form(cmd.argv)) and catalogue.is_cloud_copy(found[1]):
            copy = catalogue.cloud_copy_source(cmd.argv, found[1])
            if copy is not None and any(is_weight_path(p) or is_model_archive(p)
                                        for p in copy):
                out.append(f"{' '.join(found[1])} {copy[0]}")
    seen = {w.split(" ", 1)[1] for w in out if w.split(" ", 1)[0] in HTTP_DOWNLOADERS}
    out += _unpacked_models(cmds, seen)
    out += [f"{m.group(1)}()" for m in _HUB_CALL.finditer(text) if not _local_load(text, m)]
    out += [f"pipeline({m.group(2)!r})" for m in _START_PIPELINE.finditer(text)]
    out += [f"{m.group(1)}({m.group(2)})" for m in _PY_FETCH.finditer(text)
            if is_weight_path(m.group(2)) or is_model_archive(m.group(2))]
    out += [f"{m.group(1) or m.group(3)}()" for m in _START_NAMED_LOAD.finditer(text)
            if m.group(3)]  # pretrained vision weights (whisper's are in _HUB_CALL)
    return out


#: a Python download of a literal (or f-string) URL: ``urlretrieve(f"{BASE}/model.pth", ...)``
_PY_FETCH = LazyPattern(
    r"\b(urlretrieve|urlopen|requests\.get|httpx\.get|download_url|wget\.download)\(\s*"
    r"f?[\"']([^\"'\s]+)[\"']")


_LOCAL_ARG = LazyPattern(
    r"""\s*(?:pretrained_model_name_or_path\s*=\s*)?[rf]?["'](/|\./|\.\./|~/)"""
)


_NOT_WEIGHTS = LazyPattern(
    r"(Config|Tokenizer|TokenizerFast|Processor|FeatureExtractor|ImageProcessor)\.\s*$"
)


#: ``from M import A as B, C as D`` and ``import M as N`` (one import statement)
_FROM_IMPORT = LazyPattern(r"\bfrom\s+[\w.]+\s+import\s+(\([\w\s,]+\)|[\w \t,]+)")
_IMPORT_AS = LazyPattern(r"\bimport\s+([\w.]+)\s+as\s+(\w+)")
_ALIAS = LazyPattern(r"(\w+)\s+as\s+(\w+)")
#: the dotted name a ``.from_pretrained(`` is called on (``T.`` of ``T.from_pretrained(``)
_RECEIVER = LazyPattern(r"([\w.]+)\.\s*$")


def _aliases(text: str) -> dict[str, str]:
    """What each import alias in *text* names (``T`` -> ``AutoTokenizer`` of ``from
    transformers import AutoTokenizer as T``; ``tf`` -> ``transformers``)."""
    out = {a.group(2): a.group(1) for m in _FROM_IMPORT.finditer(text)
           for a in _ALIAS.finditer(m.group(1))}
    out.update((m.group(2), m.group(1)) for m in _IMPORT_AS.finditer(text))
    return out


def _local_load(text: str, m: re.Match[str]) -> bool:
    """Whether a ``from_pretrained(`` loads no weights: a literal local path, or a config,
    tokenizer or processor class (``AutoConfig.from_pretrained("org/m")``), also under an
    import alias (``from transformers import AutoTokenizer as T``, ``T.from_pretrained``)."""
    if m.group(1) not in {"from_pretrained", "SentenceTransformer", "CrossEncoder",
                          "WhisperModel", "EasyNMT"}:
        return False
    if _LOCAL_ARG.match(text, m.end()):
        return True
    receiver = _RECEIVER.search(text, max(0, m.start() - 200), m.start())
    if receiver is not None:
        first, dot, rest = receiver.group(1).partition(".")
        real = _aliases(text).get(first)
        if real is not None:  # judged by what the alias names, not by the alias
            return bool(_NOT_WEIGHTS.search(f"{real}{dot}{rest}."))
    return bool(_NOT_WEIGHTS.search(text, max(0, m.start() - 60), m.start()))



class StartProblem(NamedTuple):
    what: str
    #: the word that shows it (to tell ENTRYPOINT from CMD), and its line in the text
    token: str
    line: int
    #: the path whose absence the fetch runs on (``if [ ! -f P ]``): a first-start
    #: download, once if P is on a persistent volume; "" for a fetch at every start
    guard: str = ""
    #: not a fetch: a form the shell reader could not take apart (a coverage note)
    unread: bool = False


def offline(env: Mapping[str, str]) -> bool:
    return any(env.get(k, "").lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def script_offline(text: str) -> bool:
    """Whether *text* (a start command or script) sets HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE."""
    return (
        re.search(r"\b(HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE)=[\"']?(1|true|yes|on)\b", text, re.I)
        is not None
    )


_VAR = LazyPattern(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


#: programs (``python -m`` modules too: :func:`servelab.lint.shell.commands` names them by
#: their module) whose model is a positional argument after these subcommand words:
#: ``vllm serve ORG/NAME``, ``lmdeploy serve api_server ORG/NAME``
_POSITIONAL_MODEL: dict[str, tuple[tuple[str, ...], ...]] = {
    "vllm": (("serve",),),
    "lmdeploy": (("serve", "api_server"), ("serve", "gradio"), ("chat",)),
    "petals.cli.run_server": ((),),
    "mlc_llm": (("serve",), ("chat",)),
    "openllm": (("start",), ("serve",)),
    "litgpt": (("download",), ("serve",)),
}
#: short options that name a hub model: llama.cpp's ``-hf``/``-hfr`` (it downloads the repo),
#: and ``-m`` (mistral.rs, most servers' short --model; ``python -m`` is gone by then)
_SHORT_MODEL_OPTS = frozenset({"-m", "-hf", "-hfr", "--hf-repo", "--hf_model_repo_id"})


def _positional_model(name: str, args: list[str]) -> str | None:
    for words in _POSITIONAL_MODEL.get(name, ()):
        n = len(words)
        if tuple(args[:n]) == words and len(args) > n and not args[n].startswith("-"):
            return args[n]
    return None


def model_args(cmd: SimpleCommand) -> list[str]:
    """What *cmd* passes as its model: the value of a model option (``--model``,
    ``--model-id``, ``-m``, llama.cpp's ``-hf``) or a server's positional model argument."""
    args = cmd.argv[1:]
    out: list[str] = []
    positional = _positional_model(cmd.name, args)
    if positional is not None:
        out.append(positional)
    for i, a in enumerate(args):
        opt, eq, value = a.partition("=")
        if opt in _MODEL_OPTS or opt in _SHORT_MODEL_OPTS:
            out.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
    return out


def _hub_ids(cmd: SimpleCommand, env: Mapping[str, str]) -> list[str]:
    return [x for x in (expand_value(a, env) for a in model_args(cmd)) if is_hub_id(x)]


def expand_value(word: str, env: Mapping[str, str]) -> str:
    """*word* as the shell gives it: ``$V``, ``${V}`` and every ``${V:-default}``-style
    operator (BuildKit's lexer, the shell's rules for these forms); "" when it names a
    variable nobody sets, or cannot be expanded."""
    if "$" not in word:
        return word
    m = _VAR.match(word)
    if m:
        return env.get(m.group(1), "")
    from servelab.lint.words import process_word

    done = process_word(word, env.get)
    return "" if done.error else done.value


#: vLLM's option that names where it downloads the weights it is given
_DOWNLOAD_DIR = frozenset({"--download-dir", "--download_dir"})


def _download_dir_problem(cmd: SimpleCommand, env: Mapping[str, str]) -> StartProblem | None:
    """A server told where to download its model (``--download-dir DIR``) whose model comes
    from a variable the image does not set: the deployer's hub id is downloaded at start."""
    args = cmd.argv[1:]
    where = next((a.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
                  for i, a in enumerate(args) if a.partition("=")[0] in _DOWNLOAD_DIR), None)
    unset = [a for a in model_args(cmd) if "$" in a and not expand_value(a, env)]
    if where is None or not unset:
        return None
    return StartProblem(f"passes its model from `{shown(unset[0])}` (not set in the image) with "
                        f"`--download-dir {shown(where)}`: the hub model is downloaded there at "
                        "start", unset[0], cmd.line)


def is_hub_id(value: str) -> bool:
    """``org/name`` (``HF://org/name`` as MLC writes it, ``org/name:quant`` as llama.cpp's
    ``-hf`` takes it) and not a relative path (``models/x.gguf``, ``weights/llama``)."""
    if value[:5].lower() == "hf://":
        value = value[5:]
    value = value.split(":", 1)[0]
    if not _HUB_ID.match(value) or value.startswith((".", "/")):
        return False
    first, name = value.split("/", 1)
    return first.lower() not in WEIGHT_DIRS | {"model"} and not name.lower().endswith(
        (*WEIGHT_EXT, ".bin"))


def _command_problem(cmd: SimpleCommand) -> tuple[str, str] | None:
    pair = _pair(cmd)
    if pair in _INSTALLERS:
        return f"installs packages at start (`{shown(' '.join(cmd.argv[:2]))}`)", cmd.argv[0]
    if pair in _FETCHERS:
        return f"downloads at start (`{shown(' '.join(cmd.argv[:2]))}`)", cmd.argv[1]
    if cmd.name in HTTP_DOWNLOADERS:
        remote = [u for u in urls(cmd.argv) if not is_loopback(u)]
        if remote:
            return f"downloads {shown(remote[0])} at start", remote[0]
        return None
    found = catalogue.command_form([cmd.name, *cmd.argv[1:]])
    if found is None:
        return None
    fetcher, form = found
    if catalogue.is_cloud_copy(form):
        copy = catalogue.cloud_copy_source(cmd.argv, form)
        if copy is None or is_loopback(copy[0]):
            return None
        return (f"copies {shown(copy[0])} from cloud storage at start (`{' '.join(form)}`)",
                form[0])
    if fetcher.name == "NLP data and model packages":
        return f"downloads at start (`{shown(' '.join(cmd.argv[:3]))}`)", cmd.argv[0]
    return None


def _first_start(p: StartProblem) -> StartProblem:
    """*p* said as a first-start download: it runs only when its guard path is missing."""
    what = (f"{p.what.replace(' at start', '')} at first start, when {p.guard} is missing "
            f"(once, if {p.guard} is on a persistent volume; at each start of a new "
            "container otherwise)")
    return p._replace(what=what)


#: Coqui TTS's programs (``tts``, ``tts-server``, ``python -m TTS.server.server``) and the
#: names of its released models, which it downloads (from its own release hosts, so
#: HF_HUB_OFFLINE does not stop it) into ~/.local/share/tts when not there
_COQUI_PROGRAMS = frozenset(catalogue.COQUI_PROGRAMS)
_COQUI_MODULES = frozenset(catalogue.COQUI_MODULES)
_COQUI_MODEL = LazyPattern(catalogue.COQUI_MODEL)
_COQUI_OPTS = frozenset(catalogue.COQUI_OPTIONS)


def _coqui_problems(cmd: SimpleCommand, env: Mapping[str, str]) -> list[StartProblem]:
    """Coqui TTS given a released model's name (``--model_name tts_models/en/ljspeech/...``,
    ``--vocoder_name``) rather than a ``--model_path``: it downloads the model at start."""
    argv = cmd.argv  # `python -m TTS.server.server ...` comes as the module's own argv
    if cmd.name not in _COQUI_PROGRAMS and argv[0] not in _COQUI_MODULES:
        return []
    names = []
    for i, a in enumerate(argv[1:], start=1):
        opt, eq, value = a.partition("=")
        if opt not in _COQUI_OPTS:
            continue
        name = expand_value(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""), env)
        if _COQUI_MODEL.match(name):
            names.append(name)
    if not names:
        return []
    return [StartProblem(f"passes Coqui TTS its released model{'s' if len(names) > 1 else ''} "
                         f"{', '.join(map(repr, names))} by name (not a --model_path): "
                         "downloaded at start", names[0], cmd.line)]


_KOBOLD = LazyPattern(catalogue.KOBOLDCPP_PROGRAM)
_KOBOLD_OPTS = frozenset(catalogue.KOBOLDCPP_OPTIONS)


def is_koboldcpp(cmd: SimpleCommand) -> bool:
    """Whether *cmd* runs KoboldCpp: a release binary (``koboldcpp``,
    ``/app/koboldcpp-linux-x64-cuda1210``) or ``python koboldcpp.py``."""
    if _KOBOLD.match(cmd.name):
        return True
    script = cmd.argv[1].rsplit("/", 1)[-1] if len(cmd.argv) > 1 else ""
    return bool(re.match(r"^python[\d.]*$", cmd.name)) and bool(_KOBOLD.match(script))


def known_server_program(path: str) -> bool:
    """Whether *path* (a program or script the start command runs) is a model server the
    catalogue knows by name (KoboldCpp's binaries and ``koboldcpp.py``): what it does at
    start is read from its options, not from its code."""
    return bool(_KOBOLD.match(path.rsplit("/", 1)[-1]))


def _koboldcpp_problems(cmd: SimpleCommand, env: Mapping[str, str]) -> list[StartProblem]:
    """KoboldCpp given a URL or a hub id as its model (``--model https://.../x.gguf``,
    ``--hf org/name``): it downloads it at start, whatever HF_HUB_OFFLINE says."""
    args = cmd.argv[1:]
    out: list[StartProblem] = []
    for i, a in enumerate(args):
        opt, eq, value = a.partition("=")
        if opt not in _KOBOLD_OPTS:
            continue
        given = [value] if eq else []
        for nxt in args[i + 1:] if not eq else []:
            if nxt.startswith("-"):
                break
            given.append(nxt)  # --model takes several files (split GGUF parts)
        for raw in given:
            word = expand_value(raw, env)
            if (_URL.match(word) and not is_loopback(word)) or (
                    opt in {"--model", "--hf"} and is_hub_id(word)):
                out.append(StartProblem(f"passes KoboldCpp {shown(word)} as `{opt}`: it is "
                                        "downloaded at start", raw, cmd.line))
                break
    return out


def start_problems(text: str, env: Mapping[str, str]) -> list[StartProblem]:
    """Downloads and installs that *text* (a start command or script) does at start.

    *env* is the image's ENV (with ``HF_HUB_OFFLINE=1`` hub model ids are local).
    """
    out: list[StartProblem] = []
    is_offline = offline(env) or script_offline(text)
    for cmd in commands(text, env=env):
        if cmd.argv[0] == UNREAD:
            out.append(StartProblem(f"runs `{shown(cmd.argv[1])}`, whose command is not "
                                    "known before it runs", cmd.argv[1].split(" ", 1)[0],
                                    cmd.line, unread=True))
            continue
        found = _command_problem(cmd)
        if found:
            p = StartProblem(found[0], found[1], cmd.line, cmd.guard)
            out.append(_first_start(p) if cmd.guard else p)
            continue
        if _DOWNLOADER.search(cmd.name):
            out += [StartProblem(f"downloads the hub model {m!r} at start (`{cmd.name}`)", m,
                                 cmd.line) for m in _hub_ids(cmd, {**env, **cmd.env})]
            continue
        out += _coqui_problems(cmd, {**env, **cmd.env})
        if is_koboldcpp(cmd):
            out += _koboldcpp_problems(cmd, {**env, **cmd.env})
            continue
        if is_offline or offline(cmd.env):
            continue
        told = _download_dir_problem(cmd, {**env, **cmd.env})
        if told is not None:
            out.append(told)
        for model in _hub_ids(cmd, {**env, **cmd.env}):
            out.append(
                StartProblem(
                    f"passes the hub model id {model!r} to `{cmd.name}` with HF_HUB_OFFLINE "
                    "unset: the model is downloaded at start",
                    model,
                    cmd.line,
                )
            )
    if not is_offline:
        out += _python_problems(text)
    return out


#: a call's first argument that is a local path or a loopback URL (the call stays local)
_LOCAL_FIRST = LazyPattern(
    r"""\s*[rf]?["'](/|\./|\.\./|~/|https?://(localhost|127\.0\.0\.1|\[::1\])[:/])""")


def _python_problems(text: str) -> list[StartProblem]:
    """The catalogue's Python fetches in a script's text, line by line (comments skipped):
    hub downloads, named-model loads, pretrained weights, streamed files."""
    out: list[StartProblem] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(("#", "def ", "async def ")):
            continue  # a comment, or a function of the script's own named like a fetcher
        if (m := _START_HUB_CALL.search(line)) and not _LOCAL_FIRST.match(line, m.end()):
            out.append(
                StartProblem(f"downloads from a hub at start ({m.group(1)})", m.group(1), n)
            )
        elif m := _START_NAMED_LOAD.search(line):
            call = m.group(1) or m.group(3)
            what = repr(m.group(2)) if m.group(2) else m.group(4).replace(" ", "")
            out.append(StartProblem(f"loads the model {what} at start ({call}): it is "
                                    "downloaded at start", call, n))
        elif m := _START_STREAM.search(line):
            out.append(StartProblem(f"streams a download to a file at start "
                                    f"({m.group(1).split('(')[0]})", m.group(1), n))
        elif m := _START_HUB_LOAD.search(line) or _START_PIPELINE.search(line):
            out.append(StartProblem(
                f"loads the hub model {m.group(2)!r} at start ({m.group(1)}) with "
                "HF_HUB_OFFLINE unset: it is downloaded at start", m.group(2), n))
    return out


#: a Python model load from a literal hub id (``SentenceTransformer("org/name")``)
_START_HUB_LOAD = LazyPattern(
    r"\b((?:\w+\.)?from_pretrained|SentenceTransformer|CrossEncoder)\(\s*"
    r"(?:pretrained_model_name_or_path\s*=\s*|model_name_or_path\s*=\s*)?"
    r"[\"']([A-Za-z0-9][\w.-]*/[\w.-]+)[\"']"
)
#: a transformers pipeline of a literal hub model: ``pipeline("asr", model="org/name")``,
#: ``pipeline(task="asr", model="org/name")``, ``pipeline("asr", "org/name")``
_START_PIPELINE = LazyPattern(
    r"\b(pipeline)\(\s*(?:(?:task\s*=\s*)?[\"'][\w-]+[\"']\s*,\s*)?(?:model\s*=\s*)?"
    r"[\"']([A-Za-z0-9][\w.-]*/[\w.-]+)[\"']"
)
