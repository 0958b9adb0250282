"""What a container runs at start: its command line, the script it hands to ``sh -c``, and the
launch scripts it runs from a ConfigMap volume.

Each command comes back as words, with Kubernetes ``$(VAR)`` references (expanded by the
kubelet) and shell ``$VAR``/``${VAR:-default}`` references resolved from the container's
environment (literal values and ConfigMap keys) and the script's own assignments, and with
the object, field and file line it was written at. This is a reader for the shapes launch
scripts take in manifests (``&&``-chains, ``;``, pipes, line continuations, comments, quotes,
``export``), not a shell: loops and functions are read as plain commands.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from servelab.k8s.model import Container, Inventory, K8sObject, Workload, as_dict, as_list
from servelab.lint import shell
from servelab.yamlsafe import JsonPath

if TYPE_CHECKING:
    from servelab.k8s.imagefiles import ImageFiles

SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh"}
#: Words that only prefix the command that follows.
PREFIXES = {"exec", "time", "nohup", "sudo", "command", "then", "do", "else", "!", "{", "(",
            "if", "while", "until", "eval"}
_K8S_REF = re.compile(r"(\$\$)|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_REF = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
#: How deep launch scripts may call other scripts from ConfigMaps.
MAX_DEPTH = 3


@dataclass(frozen=True)
class Command:
    """One simple command: its words (variables resolved) and where it was written."""

    words: tuple[str, ...]
    obj: K8sObject
    path: JsonPath
    line: int | None
    #: The words of the command this one pipes into (``curl ... | sh``), else empty
    piped_to: tuple[str, ...] = ()
    #: The whole script this command is part of (to look for a checksum check, ...)
    script: str = ""
    #: The field of each word, for a command written as a list (exec form)
    word_paths: tuple[JsonPath, ...] = ()
    #: Where it was found when that is not the field itself: " (in the image's /start.sh,
    #: line 3)" for a script read from the image
    note: str = ""

    def where(self, i: int) -> tuple[JsonPath, int | None]:
        """The field and file line of word *i* (for a script: the script and its line)."""
        if i < len(self.word_paths):
            return self.word_paths[i], None
        return self.path, self.line

    @property
    def program(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""

    @property
    def text(self) -> str:
        return " ".join(self.words)


def tokens(text: str) -> Iterator[tuple[str, int, bool]]:
    """(token, line, is_operator): words and the operators ``;`` (also a newline), ``&&``,
    ``||``, ``|`` and ``&`` of a shell script; comments, line continuations, redirections
    and their targets dropped. The one shell tokenizer (:func:`servelab.lint.shell.tokenize`):
    quotes are honoured before lines, so a newline inside a quoted string hides nothing."""
    for tok in shell.without_redirections(shell.tokenize(text)):
        yield tok.text, tok.line, tok.op


def expand_k8s(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of command and args (``$$`` escapes)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "$"
        return env.get(m.group(2), m.group(0))
    return _K8S_REF.sub(sub, text)


def expand_shell(word: str, env: dict[str, str]) -> str:
    """``$VAR``, ``${VAR}`` and ``${VAR:-default}`` from *env*; unknown ones stay as written."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        if env.get(name):
            return env[name]
        if m.group(2) is not None:
            return expand_shell(m.group(3), env)
        return m.group(0)
    return _SHELL_REF.sub(sub, word)


def env_values(w: Workload, c: Container, inv: Inventory) -> dict[str, str]:
    """The container's environment as far as the manifests tell it: literal values, ConfigMap
    keys (``configMapKeyRef``, ``envFrom``), and earlier variables in ``$(VAR)`` form."""
    env: dict[str, str] = {}
    for src in as_list(c.data.get("envFrom")):
        cm = _configmap(inv, as_dict(as_dict(src).get("configMapRef")).get("name"), w.obj)
        prefix = str(as_dict(src).get("prefix") or "")
        if cm is not None:
            env.update({prefix + k: str(v) for k, v in _data(cm).items()})
    for entry in as_list(c.data.get("env")):
        item = as_dict(entry)
        name = str(item.get("name") or "")
        if item.get("value") is not None:
            env[name] = expand_k8s(str(item["value"]), env)
            continue
        ref = as_dict(as_dict(item.get("valueFrom")).get("configMapKeyRef"))
        cm = _configmap(inv, ref.get("name"), w.obj)
        if cm is not None and str(ref.get("key")) in _data(cm):
            env[name] = str(_data(cm)[str(ref.get("key"))])
    return env


def _configmap(inv: Inventory, name: Any, near: K8sObject) -> K8sObject | None:
    return next((cm for cm in inv.configmaps if cm.name == name and cm.same_namespace(near)),
                None)


def _data(cm: K8sObject) -> dict[str, Any]:
    return as_dict(cm.data.get("data"))


@dataclass(frozen=True)
class _Source:
    """A script's text and where it is written."""

    text: str
    obj: K8sObject
    path: JsonPath

    def line(self, offset: int) -> int | None:
        return field_line(self.obj, self.path, self.text, offset)

    def note(self, offset: int) -> str:
        return ""


@dataclass(frozen=True)
class _ImageScript(_Source):
    """A script inside the checked image, reported at the manifest field that runs it."""

    at_line: int | None = None
    file: str = ""

    def line(self, offset: int) -> int | None:
        return self.at_line

    def note(self, offset: int) -> str:
        return f" (in the image's {self.file}, line {offset})"


def field_line(obj: K8sObject, path: JsonPath, text: str, offset: int) -> int:
    """The file line of line *offset* (1-based) of the string *text* at *path* of *obj*: a
    block scalar (``|``) from the line after its indicator, a quoted or folded one as YAML
    folds it (:meth:`Document.string_line`)."""
    line = obj.source.doc.string_line((*obj.source.base, *path), offset)
    if line is not None:
        return line
    at = obj.locate(path).line
    return at + offset if "\n" in text.strip("\n") else at


def script_commands(obj: K8sObject, path: JsonPath, text: str,
                    env: dict[str, str] | None = None) -> list[Command]:
    """The commands of the shell script *text* held at *path* of *obj*."""
    return list(_commands(_Source(text, obj, path), dict(env or {})))


def _argv(c: Container) -> list[tuple[str, JsonPath]]:
    out: list[tuple[str, JsonPath]] = []
    for key in ("command", "args"):
        out += [(str(v), (*c.path, key, i)) for i, v in enumerate(as_list(c.data.get(key)))]
    return out


def _shell_script(argv: list[tuple[str, JsonPath]]) -> int | None:
    """The index of the script in ``sh -c SCRIPT`` (also ``bash -ec``, ``/usr/bin/env bash -c``)."""
    words = [w for w, _ in argv]
    start = 1 if words and words[0].rsplit("/", 1)[-1] == "env" else 0
    if len(words) <= start or words[start].rsplit("/", 1)[-1] not in SHELLS:
        return None
    for i in range(start + 1, len(words) - 1):
        if not words[i].startswith("-"):
            return None
        if "c" in words[i][1:] and not words[i].startswith("--"):
            return i + 1
    return None


def _commands(src: _Source, env: dict[str, str], depth: int = 0,
              unread: list[str] | None = None) -> Iterator[Command]:
    """The commands of a shell script; assignments update *env* for the ones after them. A
    ``sh -c`` script nested past MAX_DEPTH is not read: said in *unread*."""
    words: list[str] = []
    first = 0
    pending: list[tuple[list[str], int, str]] = []
    for token, line, is_op in tokens(src.text):
        if not is_op:
            if not words:
                first = line
            words.append(token)
            continue
        pending.append((words, first, token))
        words = []
    pending.append((words, first, ";"))
    simple = [(_simple(ws, env), line, op) for ws, line, op in pending]
    for k, (ws, line, op) in enumerate(simple):
        if not ws:
            continue
        inner = _inner_script(ws)
        if inner is not None and depth < MAX_DEPTH:  # bash -c "..." inside the script
            for sub in _commands(_Source(inner, src.obj, src.path), env, depth + 1, unread):
                yield replace(sub, line=src.line(line))
            continue
        if inner is not None and unread is not None:
            _say(unread, f"a `{ws[0]} -c` script nested more than {MAX_DEPTH} levels deep")
        piped = tuple(simple[k + 1][0]) if op == "|" and k + 1 < len(simple) else ()
        yield Command(tuple(ws), src.obj, src.path, src.line(line), piped, src.text,
                      note=src.note(line))


def _inner_script(words: list[str]) -> str | None:
    at = _shell_script([(w, ()) for w in words])
    return words[at] if at is not None else None


def _simple(words: list[str], env: dict[str, str]) -> list[str]:
    """A command's words with prefixes and assignments taken off and variables expanded."""
    out: list[str] = []
    for raw in words:
        word = expand_shell(raw, env)
        assign = _ASSIGN.match(raw)
        if not out and assign:
            env[assign.group(1)] = expand_shell(assign.group(2), env)
        elif not out and (raw in PREFIXES or raw == "export"):
            continue
        else:
            out.append(word)
    return out


def _script_files(w: Workload, c: Container, inv: Inventory,
                  words: list[str]) -> Iterator[_Source]:
    """Launch scripts the words name that a ConfigMap volume holds."""
    for word in words:
        if not word.startswith("/"):
            continue
        for m in as_list(c.data.get("volumeMounts")):
            found = _configmap_file(w, inv, as_dict(m), word)
            if found is not None:
                yield found


def _configmap_file(w: Workload, inv: Inventory, mount: dict[str, Any],
                    path: str) -> _Source | None:
    volume = as_dict(w.volume(mount.get("name")).get("configMap"))
    root = str(mount.get("mountPath") or "").rstrip("/")
    if not volume or not root or not path.startswith(root):
        return None
    rel = str(mount.get("subPath") or "") if path == root else path[len(root) + 1:]
    items = {str(as_dict(i).get("path")): str(as_dict(i).get("key"))
             for i in as_list(volume.get("items"))}
    key = items.get(rel, rel)
    cm = _configmap(inv, volume.get("name"), w.obj)
    text = _data(cm).get(key) if cm is not None else None
    if cm is None or not isinstance(text, str) or not _is_shell(key, text):
        return None
    return _Source(text, cm, ("data", key))


def _is_shell(name: str, text: str) -> bool:
    if name.endswith(".sh"):
        return True
    head = text.lstrip().split("\n", 1)[0]
    return head.startswith("#!") and any(s in head for s in SHELLS)


def _effective_argv(c: Container, img: ImageFiles,
                    argv: list[tuple[str, JsonPath]]) -> list[tuple[str, JsonPath]]:
    """What runs, as the kubelet decides: ``command`` replaces the image's ENTRYPOINT (and
    drops its CMD), ``args`` replace its CMD."""
    if "command" in c.data:
        return argv
    at = (*c.path, "image")
    own_args = "args" in c.data
    return [(w, at) for w in img.entrypoint] + (argv if own_args else [(w, at) for w in img.cmd])


def container_commands(w: Workload, c: Container, inv: Inventory) -> list[Command]:
    """Every command the container runs at start, as far as the manifests (and the checked
    image, when it is this container's) tell: its command, the scripts it runs, and its
    ``postStart`` hook (which runs at every start too)."""
    env = env_values(w, c, inv)
    argv = [(expand_k8s(v, env), p) for v, p in _argv(c)]
    img = c.image_files
    if img is not None:
        env = {**img.env, **env}
        argv = _effective_argv(c, img, argv)
    cmds = _argv_commands(w, c, argv, env)
    cmds += _from_configmaps(w, c, inv, cmds, env)
    hook = [(expand_k8s(v, env), p) for v, p in _hook_argv(c)]
    cmds += [replace(cmd, note=cmd.note + HOOK_NOTE)
             for cmd in _argv_commands(w, c, hook, env)]
    return cmds + (_from_image(c, img, cmds, env) if img is not None else [])


def _say(unread: list[str], what: str) -> None:
    if what not in unread:
        unread.append(what)


#: How a command of the ``postStart`` hook is named in a finding
HOOK_NOTE = " (in the postStart hook)"


def _hook_argv(c: Container) -> list[tuple[str, JsonPath]]:
    """The words of the container's ``lifecycle.postStart.exec.command``, with their fields."""
    lifecycle = c.data.get("lifecycle")
    start = lifecycle.get("postStart") if isinstance(lifecycle, dict) else None
    run = start.get("exec") if isinstance(start, dict) else None
    words = as_list(run.get("command")) if isinstance(run, dict) else []
    at = (*c.path, "lifecycle", "postStart", "exec", "command")
    return [(str(v), (*at, i)) for i, v in enumerate(words)]


def _argv_commands(w: Workload, c: Container, argv: list[tuple[str, JsonPath]],
                   env: dict[str, str]) -> list[Command]:
    """The commands of one argv: a shell's script, or the exec-form command itself."""
    if not argv:
        return []
    at = _shell_script(argv)
    if at is None:  # exec form: each word's field, its object resolved where it is reported
        return [Command(tuple(v for v, _ in argv), w.obj, argv[0][1], None,
                        word_paths=tuple(p for _, p in argv))]
    obj, path = c.where(argv[at][1]) or (w.obj, argv[at][1])
    return list(_commands(_Source(argv[at][0], obj, path), env, unread=c.unread))


def _mounted_over(c: Container, path: str) -> bool:
    """Whether a volume of the container hides the image's file at *path*."""
    for m in as_list(c.data.get("volumeMounts")):
        root = str(as_dict(m).get("mountPath") or "").rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            return True
    return False


def _from_image(c: Container, img: ImageFiles, cmds: list[Command],
                env: dict[str, str]) -> list[Command]:
    """The commands of the image's scripts that *cmds* run (and those they run, up to
    MAX_DEPTH), each reported at the field of the command that runs the first script. A
    script under one of the container's volume mounts is not the image's: not read."""
    out: list[Command] = []
    seen = {p for p in img.scripts if _mounted_over(c, p)}
    todo = cmds
    for _ in range(MAX_DEPTH):
        found: list[Command] = []
        for cmd in todo:
            for i, word in enumerate(cmd.words):
                hit = img.script(word)
                if hit is None or hit[0] in seen:
                    continue
                seen.add(hit[0])
                path, line = cmd.where(i) if cmd.word_paths else (cmd.path, cmd.line)
                src = _ImageScript(hit[1], cmd.obj, path, at_line=line, file=hit[0])
                found += [dataclasses.replace(k, word_paths=())
                          for k in _commands(src, env, unread=c.unread)]
        out += found
        todo = found
    deeper = sorted({hit[0] for cmd in todo for word in cmd.words
                     if (hit := img.script(word)) is not None and hit[0] not in seen})
    if deeper:
        _say(c.unread, f"the image's script(s) {', '.join(deeper)}, run by a script "
             f"{MAX_DEPTH} levels down")
    return out


def _from_configmaps(w: Workload, c: Container, inv: Inventory, cmds: list[Command],
                     env: dict[str, str]) -> list[Command]:
    out: list[Command] = []
    seen: set[tuple[str, JsonPath]] = set()
    todo = cmds
    for _ in range(MAX_DEPTH):
        found = [s for cmd in todo for s in _script_files(w, c, inv, list(cmd.words))
                 if (s.obj.name, s.path) not in seen]
        seen |= {(s.obj.name, s.path) for s in found}
        todo = [cmd for s in found for cmd in _commands(s, env, unread=c.unread)]
        out += todo
    if any((s.obj.name, s.path) not in seen for cmd in todo
           for s in _script_files(w, c, inv, list(cmd.words))):
        _say(c.unread, f"a ConfigMap script run by a script {MAX_DEPTH} levels down")
    return out
