"""Model weights in the image: weights-baked."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from pathlib import Path

from servelab.findings import Severity
from servelab.lint import downloads, follow, ignore, scratch, shell, walk
from servelab.lint.fetch import expand_known
from servelab.lint.image import StageState, is_url
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction, Stage

from . import RULES, Context, Hit
from ._common import values, whole_context
from ._start import missing_note, missing_scripts, script_name, scripts

_SHOWN = 5


def _excluder(ctx: Context) -> Callable[[str], bool]:
    """What the build's .dockerignore drops (nothing when there is none)."""
    pats = ignore.load(ctx.df.path, ctx.context_dir) or []
    return lambda rel: bool(pats) and ignore.excluded(rel, pats)


#: folders named for a model store as a whole (TorchServe's ``model-store``), beside
#: downloads.WEIGHT_DIRS; ``model`` itself only when it is copied to a model path too
_STORE_DIRS = frozenset({"model-store", "model_store", "modelstore"})
#: Triton's model repository (``model_repository/<model>/<version>/model.onnx``), judged
#: by its name as a model store is when the build context is not there
_REPOSITORY_DIRS = frozenset({"model_repository", "model-repository", "model_repo",
                              "model-repo"})
_MODEL_DIR = "model"
#: words of a fine-tuned adapter's folder (``lora/``, ``adapters_run4``): weights only when
#: copied to a model path (``COPY ./adapters_run4 /models/adapters``), as ``model`` is
_ADAPTER_WORDS = frozenset({"lora", "loras", "adapter", "adapters", "peft"})
_MODEL_WORDS = downloads.WEIGHT_DIRS | _STORE_DIRS | _REPOSITORY_DIRS | {_MODEL_DIR}
_GLOBS = frozenset("*?[")
#: endings of config, tokenizer and text files (``tokenizer.json``, ``vocab.txt``)
_TEXT_EXT = (".json", ".txt", ".yaml", ".yml", ".md", ".py", ".csv", ".tsv", ".toml", ".ini",
             ".cfg", ".jinja", ".proto", ".xml", ".html")
#: words of a SentencePiece/BPE tokenizer's ``.model`` file (``spiece.model``)
_TOKENIZER_WORDS = frozenset({"spiece", "sentencepiece", "tokenizer", "bpe", "sp", "vocab",
                              "spm"})
#: words of a small tensor of statistics (``mean.pt``, ``mel_norms.pth``), not a model
_STATS_WORDS = frozenset({"mean", "means", "std", "stds", "stddev", "stdev", "var", "variance",
                          "norm", "norms", "normalization", "normalisation", "normalizer",
                          "normaliser", "stats", "stat", "statistics", "scaler", "mu",
                          "sigma"})


def _words(name: str) -> set[str]:
    stem = name.lower().rsplit(".", 1)[0]
    return {w for w in stem.replace("-", "_").replace(".", "_").split("_") if w}


def _not_weights(name: str, size: int | None = None) -> bool:
    """Whether a file's own name says it is not model weights: a config, tokenizer or text
    file (``tokenizer.json``, ``merges.txt``, ``spiece.model``), or a tensor of statistics
    (``mean.pt``, ``std.npy``) whose size is unknown or under 1 MiB."""
    low = name.lower()
    if low.endswith(_TEXT_EXT):
        return True
    if low.endswith(".model") and _words(low) & _TOKENIZER_WORDS:
        return True
    small = size is None or size < downloads.MIN_WEIGHT_BYTES
    return small and bool(_words(low) & _STATS_WORDS)


def _named(src: str) -> bool:
    """Whether a path's own name (not a folder name) says weights (``model.safetensors``)."""
    name = src.rsplit("/", 1)[-1]
    return (downloads.is_weight_path(name) and not src.endswith("/")
            and not _not_weights(name))


def _folder(src: str) -> str:
    """The folder a COPY source names, globs dropped: ``model-store`` of ``model-store/*``."""
    parts = [p for p in src.rstrip("/").split("/") if p not in {"", "."}]
    while parts and _GLOBS & set(parts[-1]) and "." not in parts[-1].strip("*"):
        parts.pop()
    return parts[-1].lower() if parts else ""


def _model_folder(src: str, dest: str) -> bool:
    """A folder named for weights or a model store (``models/``, ``model-store/*``), or one
    named ``model`` copied to a model path (``COPY ./model /api/model``)."""
    name = _folder(src)
    if name in downloads.WEIGHT_DIRS | _STORE_DIRS | _REPOSITORY_DIRS:
        return True
    to_model_path = bool({p.lower() for p in dest.split("/") if p} & _MODEL_WORDS)
    return to_model_path and (name == _MODEL_DIR or _adapter(name))


def _adapter(name: str) -> bool:
    """Whether a folder's name says a fine-tuned adapter (LoRA, PEFT)."""
    return bool(_words(name) & _ADAPTER_WORDS)


def _what_named(src: str, dest: str) -> str:
    """A folder named like weights (``models/``), or a path inside one
    (``models/config.json``): only a folder is called a folder."""
    parts = [p for p in src.rstrip("/").split("/") if p not in {"", "."}]
    name = _folder(src)
    if name == _MODEL_DIR:
        return f"a folder named model/, to the model path {dest},"
    if _adapter(name) and name not in downloads.WEIGHT_DIRS | _STORE_DIRS | _REPOSITORY_DIRS:
        return f"a folder named like a fine-tuned adapter ({name}/), to the model path {dest},"
    if name in _STORE_DIRS:
        return f"a folder named like a model store ({name}/, where TorchServe keeps .mar archives)"
    if name in _REPOSITORY_DIRS:
        return (f"a folder named like a model repository ({name}/, where Triton keeps each "
                "model's files)")
    if src.endswith("/") or name in downloads.WEIGHT_DIRS:
        return "a folder named like model weights"
    folder = next((p for p in parts if p.lower() in downloads.WEIGHT_DIRS), "")
    return f"a path inside a folder named like model weights ({folder}/)"


def _files(found: list[tuple[str, int]]) -> str:
    shown = [f"{p} ({downloads.human_size(n)})" for p, n in found[:_SHOWN]]
    more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    total = downloads.human_size(sum(n for _p, n in found))
    return f"{', '.join(shown)}{more}; {total} in all"


def _context_source(ctx: Context, st: Stage, ins: Instruction, src: str, *, dest: str,
                    excluded: Callable[[str], bool]) -> Hit | None:
    where = {"stage": st.label}
    matches = [m for m in ctx.analysis.context_matches(src) if m.exists()]
    if not matches:
        name = src.rstrip("/").rsplit("/", 1)[-1]
        folder = _model_folder(src, dest)
        if not folder and (not downloads.is_weight_path(src) or _not_weights(name)):
            return None
        if _named(src) and name.lower() not in downloads.WEIGHT_DIRS:
            return Hit("weights-baked", ins.line,
                       f"{ins.cmd} puts model weights ({src}) into the image", context=where)
        return Hit("weights-baked", ins.line,
                   f"{ins.cmd} {src} copies {_what_named(src, dest)} that is not in the build "
                   f"context {ctx.context_dir}, so only its name was judged (pass --context "
                   "to have its files read)", context=where, severity=Severity.WARNING)
    found: list[tuple[str, int]] = []
    stopped = src in ctx.analysis.stopped_globs
    root = os.path.realpath(ctx.context_dir)
    for m in matches:
        rel = os.path.relpath(m, root).replace(os.sep, "/")
        walked = walk.weight_files(ctx.context_dir, rel, _with_excludes(ins, m, rel, excluded))
        found += [(p, n) for p, n in walked.files if not _not_weights(p.rsplit("/", 1)[-1], n)]
        stopped = stopped or walked.stopped
    if found:
        more = " (and servelab stopped at its walk limit: there may be more)" if stopped else ""
        return Hit("weights-baked", ins.line,
                   f"{ins.cmd} {src} puts model weights into the image: {_files(found)}{more}",
                   context=where)
    if stopped:
        return Hit("weights-baked", ins.line,
                   walk.Found([], True).stop_note(f"{ins.cmd} {src}"), context=where,
                   severity=Severity.WARNING, fix=walk.CONTEXT_ENTRIES.raise_hint())
    return None


def _with_excludes(ins: Instruction, match: Path, rel: str,
                   excluded: Callable[[str], bool]) -> Callable[[str], bool]:
    """*excluded* (.dockerignore) plus what the COPY's ``--exclude`` patterns leave out of
    the source *match* (at *rel* in the context): a pattern is matched against a path
    relative to the source folder, or to a file source's own folder (``COPY
    --exclude=*.bin models/ /m/`` leaves out models/*.bin)."""
    pats = ins.excluder()
    if pats is None:
        return excluded
    base = rel if match.is_dir() else posixpath.dirname(rel)
    base = "" if base in {"", "."} else base

    def drop(path: str) -> bool:
        inner = path[len(base) + 1:] if base and path.startswith(base + "/") else path
        return excluded(path) or (path != base and pats(inner))

    return drop


def _from_stage_folder(ctx: Context, st: Stage, ins: Instruction, src: str,
                       stages: _StageDownloads) -> Hit | None:
    """``COPY --from=fetch /app/models ...`` from a stage whose RUN runs a script the build
    context lacks (so whether it downloads was not judged) and where no download was seen: a
    folder named like weights is then the only trace, judged by its name (warning). A
    stage's download that was seen is reported where it happens, once."""
    source = ctx.df.stage_by_ref(ins.flag("from") or "")
    name = _folder(src)
    if source is None:
        return None
    cache = _model_cache(ctx, source, src)
    if name not in downloads.WEIGHT_DIRS | _STORE_DIRS | _REPOSITORY_DIRS and cache is None:
        return None
    chain = [s.index for s in ctx.analysis.chain(source)]
    unread = [stages.unread[i] for i in chain if i in stages.unread]
    if not unread or any(i in stages.downloading for i in chain):
        return None
    what = (f"the stage's model cache ({cache})" if cache is not None
            else f"a folder named like model weights ({name}/)")
    return Hit("weights-baked", ins.line,
               f"{ins.cmd} --from={ins.flag('from')} {src} copies {what} from stage "
               f"{source.label}, whose RUN at line {unread[0]} runs a script servelab could not "
               "read: only the folder's " + ("place" if cache is not None else "name")
               + " was judged",
               severity=Severity.WARNING, context={"stage": st.label},
               fix="pass --context with the directory docker build is given, so that the "
               "script is read; keep weights out of the image (mount them at run time)")


#: variables naming where hub and model-zoo clients keep what they download
_CACHE_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE",
               "SENTENCE_TRANSFORMERS_HOME", "TORCH_HOME")
#: their defaults under a home folder
_CACHE_DEFAULTS = (".cache/huggingface", ".cache/torch")


def _model_cache(ctx: Context, stage: Stage, src: str) -> str | None:
    """``VAR=dir`` (or the default cache under the home folder) when *src*, a path of
    *stage*, is a hub or model-zoo cache of that stage, inside one, or holds one
    (``COPY --from=dl /opt/hf-cache ...`` with ``ENV HF_HOME=/opt/hf-cache`` in ``dl``)."""
    state = ctx.analysis.state(stage)
    path = posixpath.normpath("/" + src.lstrip("/")) if src.startswith("/") else None
    if path is None:
        return None
    found = [(v, state.lookup(v) or "") for v in _CACHE_VARS]
    home = state.lookup("HOME") or "/root"
    found += [("the default cache", posixpath.join(home, d)) for d in _CACHE_DEFAULTS]
    for var, value in found:
        if not value.startswith("/"):
            continue
        cache = posixpath.normpath(value)
        if path == cache or path.startswith(cache + "/") or (
                path != "/" and cache.startswith(path + "/")):
            return f"{var}={cache}" if var != "the default cache" else cache
    return None


class _StageDownloads:
    """What the stages read so far (file order) did about weights: a download seen
    (``downloading``), or a RUN whose script was not read (``unread``: its line)."""

    def __init__(self) -> None:
        self.downloading: set[int] = set()
        self.unread: dict[int, int] = {}
        #: where a stage's RUNs seen downloading or packing weights wrote them, where known
        self.made: dict[int, list[str]] = {}

    def saw(self, st: Stage, hit: Hit) -> None:
        if hit.severity is Severity.INFO:
            self.unread.setdefault(st.index, hit.line)
        else:
            self.downloading.add(st.index)


def _made_in(ctx: Context, ref: str, src: str, stages: _StageDownloads) -> bool:
    """Whether *src*, copied from stage *ref* (not an image), lies where a RUN of that stage
    or a stage it is built FROM was seen downloading or packing weights (its
    ``--export-path``, ``--local-dir``, ``wget -P`` folder...): that RUN's finding names the
    ``COPY --from`` that brings them into the final image, so the weights are reported once,
    at the RUN. Where the RUN's output is not known (a script's download), the COPY keeps
    its own finding."""
    source = ctx.df.stage_by_ref(ref)
    if source is None:
        return False
    path = posixpath.normpath("/" + src.lstrip("/"))  # relative to the stage's root
    made = [p for s in ctx.analysis.chain(source) for p in stages.made.get(s.index, [])]
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in made)


def _copy_hits(ctx: Context, st: Stage, ins: Instruction,
               excluded: Callable[[str], bool], stages: _StageDownloads) -> Iterator[Hit]:
    srcs = values(ctx, st, [a for a in ins.args[:-1] if not a.startswith("<<")])
    dest = next(iter(values(ctx, st, [ins.args[-1]])), ins.args[-1])
    stage_or_image = ins.flag("from")
    hits = sorted(_source_hits(ctx, st, ins, srcs, dest, stage_or_image, excluded, stages),
                  key=lambda h: h.severity not in {None, Severity.ERROR})  # errors first
    if len(hits) > 1:  # one finding per COPY: `COPY a.gguf b.gguf /m/` is one problem
        more = ", ".join(h.message for h in hits[1:])
        hits[0].message += f"; and in the same {ins.cmd}: {more}"
    yield from hits[:1]


def _source_hits(ctx: Context, st: Stage, ins: Instruction,  # noqa: PLR0917
                 srcs: list[str], dest: str, stage_or_image: str | None,
                 excluded: Callable[[str], bool], stages: _StageDownloads) -> Iterator[Hit]:
    for src in srcs:
        if stage_or_image is not None or is_url(src):
            folder = _folder(src) in downloads.WEIGHT_DIRS and not is_url(src)
            if (_named(src) and not folder) or (is_url(src) and (
                    downloads.is_weight_path(src) or downloads.is_model_archive(src))):
                if stage_or_image is not None and _made_in(ctx, stage_or_image, src, stages):
                    continue  # reported at the RUN that made it, which names this COPY
                what = f"{ins.cmd} --from={stage_or_image}" if stage_or_image else ins.cmd
                yield Hit("weights-baked", ins.line,
                          f"{what} puts model weights ({src}) into the image",
                          context={"stage": st.label})
            elif stage_or_image is not None:
                hit = _from_stage_folder(ctx, st, ins, src, stages)
                if hit is not None:
                    yield hit
        elif not whole_context(src):  # COPY . is context-leak's
            hit = _context_source(ctx, st, ins, src, dest=dest, excluded=excluded)
            if hit is not None:
                yield hit


def _run_hits(ctx: Context, st: Stage, state: StageState, ins: Instruction) -> Iterator[Hit]:
    text = expand_known(follow.without_comments(ins.text()), state.lookup)
    whats = list(dict.fromkeys([*downloads.build_weight_downloads(text), *_archived(text)]))
    # a script given only config or tokenizer files (`warm.py config.json org/m`) fetches those
    others_only = downloads.names_only_other_files(text)
    ran = [] if others_only else scripts(
        ctx, ins.text(), ctx.analysis.with_binds(state, ins), state.workdirs.get(ins.line), st)
    mounts = scratch.scratch_targets(ins, state.lookup, state.workdirs.get(ins.line) or
                                     state.workdir, ctx.df.escape)
    home = _home(ctx, st, state, ins)
    cwd = state.workdirs.get(ins.line) or state.workdir
    # what lands in a cache or tmpfs mount is not in the image (docs/lint.md#weights-baked)
    dropped = scratch.landed(text, mounts, state.lookup, cwd, home)
    whats = [w for w in whats if w not in dropped]
    for src, content in ran:
        python = src.image_path.endswith(".py")
        code = follow.without_comments(content, python)
        if not python:  # a script's own `src=https://...` before `wget "$src/$name.bin"`
            code = expand_known(code, shell.assignments(code).get)
        gone = scratch.landed(code, mounts, state.lookup, cwd, home)
        for what in dict.fromkeys(downloads.build_weight_downloads(code)):
            if what not in gone:
                whats.append(f"{what} in {script_name(src)}{_line_of(code, what)}")
    if not whats and not others_only and not dropped:
        whats += _followed_downloads(ctx, st, state, ins)
    missing = [] if others_only else missing_scripts(ctx, ins.text(), state,
                                                     state.workdirs.get(ins.line), st)
    if whats:
        note = f"; {missing_note(ctx, missing)}" if missing else ""
        did = ("packs model weights into the image" if all(w.startswith(_ARCHIVER) for w in whats)
               else "downloads model weights")
        yield Hit("weights-baked", ins.line,
                  f"RUN {did} at build time ({', '.join(whats)})"
                  f"{reaches(ctx, st)}{note}", context={"stage": st.label})
    elif missing:
        yield Hit("weights-baked", ins.line,
                  f"whether this RUN downloads model weights was not judged: "
                  f"{missing_note(ctx, missing)}", fix=f"pass --context with the directory "
                  f"docker build is given (now {ctx.context_dir})", context={"stage": st.label},
                  severity=Severity.INFO)


def _home(ctx: Context, st: Stage, state: StageState, ins: Instruction) -> str | None:
    """The home folder of the user a RUN runs as: ``$HOME``, else /root for root (no USER
    before it, or USER root/0); None for another user (its home is in /etc/passwd)."""
    home = state.lookup("HOME")
    if home:
        return home
    users = [i for i in st.instructions if i.cmd == "USER" and i.line < ins.line and i.args]
    if users:
        user: str | None = expand_known(users[-1].args[0], state.lookup)
    elif st.parent is not None:
        inherited = ctx.analysis.state(ctx.df.stages[st.parent]).user
        user = inherited[0] if inherited is not None else "root"
    else:
        user = "root"
    return "/root" if user is not None and user.split(":")[0] in {"root", "0"} else None


#: what a followed module's load must be to fetch weights: a hub or model-zoo load
#: (``hf_hub_download(...)``, ``X.from_pretrained('org/m')``, ``WhisperModel(...)``,
#: ``torch.hub.load()``, pretrained vision weights), not a data fetch (``nltk.download``)
_MODEL_LOAD = LazyPattern(
    r"^([\w.]*\.)?(snapshot_download|hf_hub_download|from_pretrained|pipeline|"
    r"SentenceTransformer|CrossEncoder|WhisperModel|EasyNMT|load_model|download_model|"
    r"load_state_dict_from_url|load_url|create_model|create_model_and_transforms|"
    r"from_single_file|Repository)\(|^torch\.hub\.load|^torchvision\.models\.")
#: a load of a config, tokenizer or processor (``AutoTokenizer.from_pretrained('org/m')``):
#: a download, but not of weights
_NOT_WEIGHTS_LOAD = LazyPattern(
    r"(Config|Tokenizer|TokenizerFast|Processor|FeatureExtractor|ImageProcessor)\.")


def _followed_downloads(ctx: Context, st: Stage, state: StageState,
                        ins: Instruction) -> list[str]:
    """Hub and model downloads in the modules a Python script run at build imports and
    calls, followed as a start command's application is (``python melo/init_downloads.py``
    builds ``melo.api.TTS``, whose ``__init__`` calls ``hf_hub_download``): what runs at the
    script's top level and under ``__main__``, file checks included (nothing is in place
    yet at build). Data fetches (NLTK corpora, plain files) are not weights."""
    out: list[str] = []
    cwd = state.workdirs.get(ins.line) or state.workdir
    text = follow.without_comments(ins.text())
    for entry in follow.entries(text, state, cwd):
        app = follow.follow_app(ctx.analysis, entry, shell.assignments(text), st)
        out += [f"{f.what} at {f.where} ({f.via})" for f in app.loads
                if f.kind != "install" and f.when == follow.START
                and _MODEL_LOAD.search(f.what) and not _NOT_WEIGHTS_LOAD.search(f.what)]
    return list(dict.fromkeys(out))


_ARCHIVER = "torch-model-archiver"


def _archived(text: str) -> Iterator[str]:
    """``torch-model-archiver --serialized-file model.pt ...``: the weights zipped into a
    TorchServe ``.mar`` in the image (``--export-path``, default the working directory).
    Without ``--serialized-file`` the archive holds only code (a handler that downloads)."""
    for cmd in shell.commands(text):
        if cmd.name != _ARCHIVER:
            continue
        opts = dict(_option_values(cmd.argv[1:]))
        weights = opts.get("--serialized-file")
        if weights:
            where = opts.get("--export-path", ".")
            yield f"{_ARCHIVER} --serialized-file {weights} into {where}"


def _outputs(ctx: Context, st: Stage, state: StageState, ins: Instruction) -> list[str]:
    """Where a RUN found downloading or packing weights wrote them, where known: the
    archiver's ``--export-path`` (default the working directory) and the destinations of
    its shell downloads (docs/lint.md#weights-baked)."""
    text = expand_known(follow.without_comments(ins.text()), state.lookup)
    cwd = state.workdirs.get(ins.line) or state.workdir
    out = scratch.destinations(text, state.lookup, cwd, _home(ctx, st, state, ins))
    for cmd in shell.commands(text):
        if cmd.name == _ARCHIVER and "--serialized-file" in dict(_option_values(cmd.argv[1:])):
            where = dict(_option_values(cmd.argv[1:])).get("--export-path", ".")
            if "$" not in where:
                out.append(posixpath.normpath(posixpath.join(cwd, where)))
    return out


def _option_values(args: list[str]) -> Iterator[tuple[str, str]]:
    """(option, value) of ``--opt value`` and ``--opt=value`` words."""
    for i, word in enumerate(args):
        if word.startswith("--") and "=" in word:
            yield word.split("=", 1)[0], word.split("=", 1)[1]
        elif word.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield word, args[i + 1]


def _line_of(code: str, what: str) -> str:
    """``:N``, the first line of *code* that holds what a phrase names (``snapshot_download``
    of ``snapshot_download()``, the URL of ``curl URL``), or "" when none does."""
    if "(" in what:  # a call: `name(`, not the import that names it
        needle = what.split("(", 1)[0].rsplit(" ", 1)[-1] + "("
    else:
        needle = max(what.split(), key=len, default="")
        if what.strip() and any(what in line for line in code.splitlines()):
            needle = what  # `ollama pull` on its own line, not the `ollama serve &` before it
    for n, line in enumerate(code.splitlines(), start=1):
        if needle and needle in line:
            return f":{n}"
    return ""


def reaches(ctx: Context, st: Stage) -> str:
    """How a builder stage's download reaches the final image (empty for the final
    image's own stages)."""
    through = follow.reaches_final(ctx.analysis, st)
    if not through:
        return ""
    shown = ", ".join(f"{i.cmd} {' '.join(i.flags)} at line {i.line}".replace("  ", " ")
                      for i in through[:3])
    return f"; stage {st.label} reaches the final image through {shown}"


@RULES.rule(
    "weights-baked",
    Severity.ERROR,
    "model weights copied or downloaded into the image",
    rationale="Weights in a layer make the image gigabytes larger: every node pulls them "
    "before the server starts, a new model means a new image, and the pull cache is useless "
    "across models. Stages the final image copies from count (the finding names the COPY "
    "--from that brings the download in), and so do scripts a RUN runs (download_model.py, "
    "fetch.sh, the recipe of make TARGET, every install.py a loop or find -exec runs). "
    "Files are judged by content (safetensors/GGUF headers, "
    "weight names with a weight container or of 1 MiB and more, TorchServe .mar archives), "
    "honouring .dockerignore; tokenizer and config files (tokenizer.json, vocab.txt, "
    "spiece.model) and small tensors of statistics (mean.pt under 1 MiB, or of unknown "
    "size) are not weights. Without the build context a folder is judged by its name, at "
    "warning severity: models/, weights/, checkpoints/, a model store (model-store/), a "
    "Triton model repository (model_repository/), or "
    "model/ or an adapter's folder (lora/) copied to a model path. torch-model-archiver "
    "run with --serialized-file packs weights into the image.",
    fix="keep weights out of the image: mount them at run time (-v model:/models:ro, a PVC, "
    "or an init container), and point the server at the mount with HF_HUB_OFFLINE=1",
)
def check_weights_baked(ctx: Context) -> Iterator[Hit]:
    excluded = _excluder(ctx)
    stages = _StageDownloads()
    for st in ctx.analysis.reachable():
        state = ctx.analysis.state(st)
        for ins in st.instructions:
            if ins.cmd in {"COPY", "ADD"} and len(ins.args) >= 2:
                yield from _copy_hits(ctx, st, ins, excluded, stages)
            elif ins.cmd == "RUN":
                for hit in _run_hits(ctx, st, state, ins):
                    stages.saw(st, hit)
                    if hit.severity is not Severity.INFO:
                        stages.made.setdefault(st.index, []).extend(
                            _outputs(ctx, st, state, ins))
                    yield hit
