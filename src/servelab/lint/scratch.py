"""Downloads that land in a RUN's cache or tmpfs mount, and so never reach the image.

``RUN --mount=type=cache,target=/root/.cache/huggingface huggingface-cli download org/m``
writes the model into BuildKit's cache mount (or a tmpfs), which is not part of the layer:
the image holds no weights. :func:`scratch_targets` gives the mount targets of a RUN (ARG and
ENV values substituted, as BuildKit does) and :func:`landed` the download phrases of
:func:`servelab.lint.downloads.build_weight_downloads` whose destination lies inside one.

A destination is known for ``wget`` (``-O``/``-P``), ``curl`` (``-o``, ``-O``,
``--output-dir``, ``> file``), ``aria2c`` (``-d``), ``huggingface-cli``/``hf download``
(``--local-dir``, ``--cache-dir``, else the Hugging Face cache), ``ollama pull``
(``$OLLAMA_MODELS``), ``git clone``/``git lfs pull``, and the Hugging Face hub calls
(``snapshot_download()``, ``from_pretrained()`` ...: their ``local_dir=``/``cache_dir=``,
else the cache from ``HF_HUB_CACHE``, ``HF_HOME``, ``XDG_CACHE_HOME`` or the home folder).
Anything else, or a RUN that copies out of the mount (``cp``, ``mv``, ``rsync``,
``save_pretrained``, ``shutil.copy*``), keeps its finding.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable

from servelab.lint import downloads, shell
from servelab.lint.parse import Instruction
from servelab.lint.words import process_word

Lookup = Callable[[str], "str | None"]

#: the Hugging Face hub calls whose files go to local_dir=/cache_dir= or the HF cache
_HF_CALLS = frozenset({"snapshot_download", "hf_hub_download", "from_pretrained",
                       "SentenceTransformer", "CrossEncoder"})
_DIR_KWARG = re.compile(r"\b(local_dir|cache_dir|cache_folder)\s*=\s*[rf]?[\"']([^\"']+)[\"']")
_ANY_DIR_KWARG = re.compile(r"\b(local_dir|cache_dir|cache_folder)\s*=")
_COPY_OUT_PY = re.compile(r"\b(save_pretrained|shutil\.copy\w*|shutil\.move|copytree)\s*\(")
_COPIERS = frozenset({"cp", "mv", "rsync", "install", "tar"})


def scratch_targets(ins: Instruction, lookup: Lookup, workdir: str, escape: str) -> list[str]:
    """The absolute targets of *ins*'s ``type=cache`` and ``type=tmpfs`` mounts."""
    out = []
    for opts in ins.mounts():
        if opts["type"] not in {"cache", "tmpfs"} or not opts.get("target"):
            continue
        exp = process_word(opts["target"], lookup, escape)
        if exp.unresolved or exp.error:
            continue
        out.append(posixpath.normpath(posixpath.join(workdir, exp.value)))
    return out


def _inside(path: str, targets: Iterable[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


class _Env:
    """The variables a download's destination depends on, and the working directory."""

    def __init__(self, lookup: Lookup, cwd: str, home: str | None) -> None:
        self.lookup = lookup
        self.cwd = cwd
        self.home = home
        self.set: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.set[name] if name in self.set else self.lookup(name)

    def path(self, p: str) -> str | None:
        if "$" in p:
            return None
        if p.startswith("~/") or p == "~":
            if self.home is None:
                return None
            p = self.home + p[1:]
        return posixpath.normpath(posixpath.join(self.cwd, p))

    def hf_cache(self) -> str | None:
        for name, tail in (("HF_HUB_CACHE", ""), ("HUGGINGFACE_HUB_CACHE", ""),
                           ("HF_HOME", "hub")):
            value = self.get(name)
            if value:
                return self.path(posixpath.join(value, tail) if tail else value)
        xdg = self.get("XDG_CACHE_HOME")
        if xdg:
            return self.path(posixpath.join(xdg, "huggingface/hub"))
        home = self.get("HOME") or self.home
        return None if home is None else self.path(posixpath.join(home, ".cache/huggingface/hub"))


def _option(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The value of ``-o X``, ``-oX``, ``--out X`` or ``--out=X`` for any of *names*."""
    for i, a in enumerate(argv[1:], start=1):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if n.startswith("--") and a.startswith(n + "="):
                return a[len(n) + 1:]
            if not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                return a[len(n):]
    return None


def _http_destination(cmd: shell.SimpleCommand, env: _Env) -> str | None:
    argv = cmd.argv
    if cmd.name == "wget":
        out = _option(argv, ("-O", "--output-document"))
        if out is not None:
            return None if out == "-" else env.path(out)
        return env.path(_option(argv, ("-P", "--directory-prefix")) or ".")
    out = _option(argv, ("-o", "--output"))
    where = _option(argv, ("--output-dir",)) or "."
    if out is not None:
        return env.path(posixpath.join(where, out))
    if cmd.stdout:
        return env.path(cmd.stdout)
    if any(a in {"-O", "--remote-name", "--remote-name-all"} for a in argv):
        return env.path(where)
    return None


def _destination(cmd: shell.SimpleCommand, env: _Env) -> str | None:
    """Where *cmd*'s download is written, or None when not known."""
    argv, name = cmd.argv, cmd.name
    sub = next((a for a in argv[1:] if not a.startswith("-")), "")
    if name in {"wget", "curl"}:
        return _http_destination(cmd, env)
    if name == "aria2c":
        return env.path(_option(argv, ("-d", "--dir")) or ".")
    if (name, sub) in {("huggingface-cli", "download"), ("hf", "download")}:
        out = _option(argv, ("--local-dir", "--cache-dir"))
        return env.path(out) if out is not None else env.hf_cache()
    if (name, sub) == ("ollama", "pull"):
        models = env.get("OLLAMA_MODELS")
        if models:
            return env.path(models)
        return None if env.home is None else env.path(posixpath.join(env.home, ".ollama"))
    if (name, sub) == ("git", "lfs"):
        return env.path(".")
    if (name, sub) == ("git", "clone"):
        words = [a for a in argv[2:] if not a.startswith("-")]
        if len(words) >= 2:
            return env.path(words[1])
        if words:
            return env.path(posixpath.basename(words[0].rstrip("/")).removesuffix(".git"))
    return None


def _copies_out(cmd: shell.SimpleCommand, env: _Env, targets: list[str]) -> bool:
    """Whether *cmd* copies something from a mount into the image (``cp -r /cache/m /m``)."""
    if cmd.name not in _COPIERS:
        return False
    words = [a for a in cmd.argv[1:] if not a.startswith("-")]
    paths = [env.path(w) for w in words]
    dest = paths[-1] if paths else None
    return any(p is not None and _inside(p, targets) for p in paths[:-1]) and not (
        dest is not None and _inside(dest, targets))


def destinations(text: str, lookup: Lookup, cwd: str, home: str | None) -> list[str]:
    """Where the shell downloads of ``build_weight_downloads(text)`` write, where known
    (``hf download org/m --local-dir /w``: /w; ``wget -P /m URL``: /m)."""
    env = _Env(lookup, cwd, home)
    out: list[str] = []
    for cmd in shell.commands(text):
        if cmd.name == "cd" and len(cmd.argv) == 2:
            env.cwd = env.path(cmd.argv[1]) or env.cwd
            continue
        if not downloads.build_weight_downloads(shlex.join(cmd.argv)):
            continue
        saved = dict(env.set)
        env.set.update(cmd.env)
        dest = _destination(cmd, env)
        env.set = saved
        if dest is not None:
            out.append(dest)
    return out


def landed(text: str, targets: list[str], lookup: Lookup, cwd: str,
           home: str | None) -> set[str]:
    """The phrases of ``build_weight_downloads(text)`` whose files land inside *targets*
    (none when *text* copies out of them)."""
    if not targets:
        return set()
    env = _Env(lookup, cwd, home)
    inside: set[str] = set()
    outside: set[str] = set()
    for cmd in shell.commands(text):
        if cmd.name == "cd" and len(cmd.argv) == 2:
            moved = env.path(cmd.argv[1])
            env.cwd = moved or env.cwd
            continue
        if cmd.name == "export":
            for a in cmd.argv[1:]:
                k, eq, v = a.partition("=")
                if eq:
                    env.set[k] = v
            continue
        if _copies_out(cmd, env, targets):
            return set()
        # a command's own downloads (a Python call in `python -c` is _python_calls')
        phrases = {p for p in downloads.build_weight_downloads(shlex.join(cmd.argv))
                   if not p.endswith(")")}
        if not phrases:
            continue
        saved = dict(env.set)
        env.set.update(cmd.env)
        dest = _destination(cmd, env)
        env.set = saved
        (inside if dest is not None and _inside(dest, targets) else outside).update(phrases)
    if _COPY_OUT_PY.search(text):
        return set()
    # a download unpacked into a folder (``curl URL | tar -xz -C /models/x``): its folder
    for phrase in downloads.build_weight_downloads(text):
        _what, into, folder = phrase.partition(" unpacked into ")
        if into:
            where = env.path(folder)
            (inside if where is not None and _inside(where, targets) else outside).add(phrase)
    _python_calls(text, targets, env, inside, outside)
    return inside - outside


def _python_calls(text: str, targets: list[str], env: _Env, inside: set[str],
                  outside: set[str]) -> None:
    """Hub calls in Python text: inside when every literal ``local_dir=``/``cache_dir=``
    is, or, with none given, when the Hugging Face cache is."""
    calls = {f"{c}()" for c in _HF_CALLS if re.search(rf"\b{c}\s*\(", text)}
    if not calls:
        return
    dirs = [env.path(m.group(2)) for m in _DIR_KWARG.finditer(text)]
    if dirs:
        ok = all(d is not None and _inside(d, targets) for d in dirs)
    elif _ANY_DIR_KWARG.search(text):
        ok = False  # a folder given by a variable: not known
    else:
        cache = env.hf_cache()
        ok = cache is not None and _inside(cache, targets)
    (inside if ok else outside).update(calls)
