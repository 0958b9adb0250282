"""The start scripts inside the checked image (``servelab k8s-check --image``).

A container's command often names a script that only the image holds (``/opt/start.sh``,
an ENTRYPOINT of ``docker-entrypoint.sh``). When the image is available locally, k8s-check
reads those scripts from the image's own layers, through :mod:`servelab.image.oci` (every
blob verified against its digest, each layer against its ``diff_id``, decompression capped),
and applies the start-install and model-mount rules to what they run.

Accepted (nothing is fetched from outside this machine):

* a servelab run directory (the one with ``summary.json``): the treatment arm's tested image,
  from the OCI archive the run kept;
* an OCI archive or an OCI layout directory (``oci-archive:``/``oci:`` prefixes too);
* an image in the local engine (``docker-daemon:REF``, or a reference the engine has);
* an image in a registry on this machine's loopback (``127.0.0.1:5000/name:tag``).

What is read: the image config (ENTRYPOINT, CMD, Env, WorkingDir) of one platform manifest
(linux/amd64 when there are several, else the first), then its layers applied in one pass as
the runtime unpacks them (:mod:`servelab.k8s.layerfs`: names cleaned as containerd cleans
them, links followed inside the image root, whiteouts and opaque folders applied, the last
layer's file wins). The text is kept of each regular file up to :data:`MAX_SCRIPT` bytes that
is a shell script (a ``.sh`` name, a ``#!`` line naming a shell, or an executable text file
with no ``#!`` line, which ``sh`` runs), and of every file the start command names whatever
its name and mode (``sh /opt/start`` runs a file with neither). At most :data:`MAX_SCRIPTS`
scripts are kept: past them, only files the start command names, and a coverage note.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.errors import CommandError, InputError
from servelab.findings import CoverageNote
from servelab.image.oci import CHUNK, ImageSource, PlatformManifest, open_image
from servelab.image.ref import ImageRef
from servelab.k8s.layerfs import FILE, Layers, Node, Unsafe

#: A shell script larger than this is not a launch script: not read.
MAX_SCRIPT = 256 * 1024
#: At most this many scripts are kept (the first ones found, in layer order); files the
#: start command names are kept past it
MAX_SCRIPTS = 2000
#: PATH when the image sets none (a bare command word is looked for there)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SHELLS = ("sh", "bash", "dash", "ash", "zsh", "ksh")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_TAR_ERRORS = (tarfile.TarError, EOFError, ValueError, OverflowError, UnicodeError)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class ImageFiles:
    """What k8s-check knows of the checked image: its start command and its shell scripts."""

    name: str
    #: The digests that name this image: the platform manifest's and the index's above it
    digests: set[str]
    #: Repositories it is known by (the reference given, the archive's ref.name annotations)
    repositories: set[str]
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    #: Absolute path -> text of each shell script in the image
    scripts: dict[str, str] = field(default_factory=dict)
    #: the image's files as its layers leave them (links resolved through it)
    root: Layers | None = None
    #: what was not fully read (bounds, names above the root, link loops)
    coverage: list[CoverageNote] = field(default_factory=list)
    #: what k8s-check says it read
    notes: list[str] = field(default_factory=list)

    def script(self, word: str) -> tuple[str, str] | None:
        """(path, text) of the script *word* names: absolute, relative to WorkingDir, or a
        bare command found on the image's PATH; symbolic links followed inside the image."""
        for path in candidates(word, self.workdir, self.env.get("PATH", DEFAULT_PATH)):
            found = self._lookup(path)
            if found is not None:
                return found
        return None

    def _lookup(self, path: str) -> tuple[str, str] | None:
        text = self.scripts.get(path)
        if text is not None or self.root is None:
            return (path, text) if text is not None else None
        try:
            got = self.root.lookup(path)
        except Unsafe as e:
            self._note(CoverageNote(f"{path} in the image", f"{e}: not read"))
            return None
        if got is None or got[1].kind != FILE:
            return None
        real, node = got
        if node.text is None and node.size > MAX_SCRIPT:
            self._note(CoverageNote(f"{path} in the image ({real}, {node.size} bytes)",
                                    f"servelab reads files up to {MAX_SCRIPT} bytes "
                                    "(MAX_SCRIPT)"))
        return (real, node.text) if node.text is not None else None

    def _note(self, note: CoverageNote) -> None:
        if note not in self.coverage:
            self.coverage.append(note)

    def names(self, image: str) -> bool:
        """Whether the manifest's image reference *image* is this image (same digest, or
        same repository when it has no digest)."""
        name, _, digest = ImageRef.split(image)
        if digest:
            return digest in self.digests
        return _repo(name) in self.repositories


def _repo(name: str) -> str:
    """``vllm/vllm-openai`` for ``docker.io/vllm/vllm-openai`` and ``vllm/vllm-openai``."""
    try:
        ref = ImageRef.parse(name)
    except InputError:
        return name
    return ref.repository


def _is_run_dir(text: str) -> bool:
    p = Path(text)
    return p.is_dir() and (p / "summary.json").is_file()


def open_source(text: str) -> tuple[ImageSource, set[str]]:
    """The image source for *text*, and the repositories the text names."""
    if _is_run_dir(text):
        from servelab.image.oci import OciArchive
        from servelab.image.push import NotReproducible, tested_image

        try:
            return OciArchive(tested_image(Path(text)).archive), set()
        except NotReproducible as e:
            raise InputError(f"--image {text}: {e}",
                             hint="pass the archive of the image you deploy: --image "
                             f"{Path(text) / 'images' / '<digest>.oci.tar'}") from e
    if text.startswith(("oci:", "oci-archive:", "docker-daemon:")) or Path(text).exists():
        given = text.split(":", 1)[1] if text.startswith("docker-daemon:") else ""
        return open_image(text), {_repo(ImageRef.split(given)[0])} if given else set()
    try:
        ref = ImageRef.parse(text.removeprefix("docker://"))
    except InputError as e:
        raise InputError(f"--image {text}: no such file, directory or image reference",
                         hint="pass a servelab run directory, an OCI archive or layout, an "
                         "image in the local engine, or one in a registry on 127.0.0.1") from e
    repos = {ref.repository}
    if ref.registry.split(":")[0] in LOOPBACK or ref.registry.startswith("[::1]"):
        return open_image(text), repos
    # not on this machine's loopback: only the local engine may hold it, nothing is fetched
    try:
        return open_image("docker-daemon:" + text.removeprefix("docker://")), repos
    except CommandError as e:
        raise InputError(
            f"--image {text}: the local engine has no such image (k8s-check reads images "
            "available on this machine only, it pulls nothing)",
            hint="pass the servelab run directory or the OCI archive of the image, load it "
            "into the engine (docker load -i FILE), or push it to a registry on 127.0.0.1",
        ) from e


def pick_platform(manifests: list[PlatformManifest]) -> PlatformManifest:
    for pm in manifests:
        if pm.platform in ("linux/amd64", "linux/amd64/v1"):
            return pm
    return manifests[0]


def candidates(word: str, workdir: str, path_var: str = DEFAULT_PATH) -> list[str]:
    """The image paths a command word may name, most likely first: itself when absolute,
    under *workdir* when relative with a ``/``; a bare word on *path_var* (PATH, as the
    runtime finds a program) and under *workdir* (as ``sh launch`` finds its script), the
    working directory first for a ``.sh`` name."""
    if not word or word.startswith("-") or "\0" in word or len(word) > 4096:
        return []
    if word.startswith("/"):
        return [posixpath.normpath(word)]
    here = posixpath.normpath(posixpath.join(workdir or "/", word))
    if "/" in word:
        return [here]
    if "=" in word or "$" in word or " " in word or word in {".", ".."}:
        return []
    dirs = [d for d in path_var.split(":") if d.startswith("/")][:32]
    on_path = [posixpath.normpath(posixpath.join(d, word)) for d in dirs]
    ordered = [here, *on_path] if word.endswith(".sh") else [*on_path, here]
    return list(dict.fromkeys(ordered))


def read_image(text: str, named: Iterable[str] = ()) -> ImageFiles:
    """Read the checked image's config and shell scripts (see the module docstring);
    *named*: words of the commands that run it (a manifest's command and args), whose files
    are read whatever their name or mode, as the image's ENTRYPOINT and CMD are."""
    source, repos = open_source(text)
    with source:
        pm = pick_platform(source.platform_manifests())
        cfg = source.read_config(pm.config)
        conf = as_dict(cfg.get("config"))
        env = dict(str(e).split("=", 1) for e in as_list(conf.get("Env")) if "=" in str(e))
        entrypoint = [str(x) for x in as_list(conf.get("Entrypoint"))]
        cmd = [str(x) for x in as_list(conf.get("Cmd"))]
        workdir = str(conf.get("WorkingDir") or "/")
        wanted = {p for w in [*entrypoint, *cmd, *named]
                  for p in candidates(w, workdir, env.get("PATH", DEFAULT_PATH))}
        root = _files_of(source, pm, cfg, wanted)
        repos |= {_repo(ImageRef.split(a)[0]) for a in _ref_names(source)}
        files = ImageFiles(
            name=source.name, digests={pm.digest, *pm.parents}, repositories=repos,
            entrypoint=entrypoint, cmd=cmd, env=env, workdir=workdir,
            scripts={p: n.text for p, n in root.files() if n.text is not None}, root=root,
            coverage=list(root.notes))
        for path in sorted(wanted):  # links the start command names, read now
            files.script(path)
        return files


def _ref_names(source: ImageSource) -> list[str]:
    _, doc = source.top()
    out = []
    for m in doc.get("manifests") or []:
        ann = m.get("annotations") if isinstance(m, dict) else None
        if isinstance(ann, dict):
            out += [str(ann[k]) for k in ("io.containerd.image.name",
                                          "org.opencontainers.image.ref.name") if k in ann]
    return [n for n in out if "/" in n or ":" in n]


class _Keep:
    """Which files' text :class:`Layers` keeps: shell scripts, at most :data:`MAX_SCRIPTS`
    of them, and every file the start command names."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.kept = 0
        self.over = False

    def __call__(self, path: str, m: tarfile.TarInfo, head: bytes) -> bool:
        if m.size > MAX_SCRIPT:
            return False
        if path in self.wanted:
            return True
        shebang = head == b"#!"
        if not (path.endswith(".sh") or shebang or m.mode & 0o111):
            return False
        if self.kept >= MAX_SCRIPTS:
            self.over = True
            return False
        self.kept += 1
        return True


def _files_of(source: ImageSource, pm: PlatformManifest, cfg: dict[str, Any],
              wanted: set[str]) -> Layers:
    diff_ids = [str(d) for d in as_list(as_dict(cfg.get("rootfs")).get("diff_ids"))]
    keep = _Keep(wanted)
    root = Layers(keep)
    for i, layer in enumerate(pm.layers):
        root.layer = i
        diff_id = diff_ids[i] if i < len(diff_ids) else None
        shown = layer.digest[:19]
        with source.open_layer(layer, diff_id=diff_id) as data:
            try:
                with tarfile.open(fileobj=data, mode="r|", bufsize=CHUNK) as tf:
                    for m in tf:
                        root.apply(tf, m, shown)
            except _TAR_ERRORS as e:
                raise InputError(f"{source.name}: layer {layer.digest} is not a readable tar "
                                 f"archive: {str(e)[:200]}",
                                 hint="the layer is corrupt; rebuild or re-export the image") from e
    _drop_non_scripts(root, wanted)
    if keep.over:
        root.notes.append(CoverageNote(
            f"shell scripts of {source.name} past the first {MAX_SCRIPTS}",
            f"servelab keeps at most {MAX_SCRIPTS} scripts of an image (MAX_SCRIPTS); the "
            "files the start command names were kept, scripts they run beyond the cap were "
            "not read"))
    _read_late(source, pm, diff_ids, root, wanted)
    return root


def _drop_non_scripts(root: Layers, wanted: set[str]) -> None:
    """Forget the text of files read for their ``#!`` line or exec bit that are no shell
    scripts (a Python program, an ELF binary was never read: NUL bytes)."""
    for path, node in root.files():
        if node.text is not None and path not in wanted and not path.endswith(".sh"):
            first = node.text.split("\n", 1)[0]
            if first.startswith("#!") and not _shebang_shell(first.encode()):
                node.text = None


def _read_late(source: ImageSource, pm: PlatformManifest, diff_ids: list[str], root: Layers,
               wanted: set[str]) -> None:
    """Read the files the start command reaches through a link, which the pass could not
    know it wanted: only the layers that hold them, once each."""
    late: dict[int, dict[str, Node]] = {}
    for path in wanted:
        try:
            got = root.lookup(path)
        except Unsafe:
            continue  # said when the script is looked for
        if got is None:
            continue
        node = got[1]
        if node.kind == FILE and node.text is None and node.member and node.size <= MAX_SCRIPT:
            late.setdefault(node.origin, {})[node.member] = node
    for i, members in sorted(late.items()):
        diff_id = diff_ids[i] if i < len(diff_ids) else None
        with source.open_layer(pm.layers[i], diff_id=diff_id) as data:
            try:
                with tarfile.open(fileobj=data, mode="r|", bufsize=CHUNK) as tf:
                    for m in tf:
                        late_node = members.get(m.name)
                        f = tf.extractfile(m) if late_node is not None and m.isreg() else None
                        raw = f.read(MAX_SCRIPT) if f is not None else b""
                        if late_node is not None and raw and b"\0" not in raw:
                            late_node.text = raw.decode("utf-8", errors="replace")
            except _TAR_ERRORS:
                continue  # the first pass read this layer whole: not expected


def _shebang_shell(raw: bytes) -> bool:
    head = raw.split(b"\n", 1)[0].decode("ascii", errors="replace")
    if not head.startswith("#!"):
        return False
    words = head[2:].split()
    prog = words[0].rsplit("/", 1)[-1] if words else ""
    if prog == "env" and len(words) > 1:
        prog = words[1] if words[1] != "-S" or len(words) < 3 else words[2]
    return prog in SHELLS
