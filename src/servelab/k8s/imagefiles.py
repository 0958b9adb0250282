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
(linux/amd64 when there are several, else the first) and every regular file that is a shell
script (a ``.sh`` name, or a ``#!`` line naming a shell) up to :data:`MAX_SCRIPT` bytes,
:data:`MAX_SCRIPTS` of them, as the layers leave them (later layers win, whiteouts delete).
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from servelab.errors import CommandError, InputError
from servelab.image.oci import CHUNK, ImageSource, PlatformManifest, open_image
from servelab.image.ref import ImageRef

#: A shell script larger than this is not a launch script: not read.
MAX_SCRIPT = 256 * 1024
#: At most this many scripts are kept (the first ones found, in layer order).
MAX_SCRIPTS = 2000
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

    def script(self, word: str) -> tuple[str, str] | None:
        """(path, text) of the script *word* names (absolute, or relative to WorkingDir)."""
        if not word or word.startswith("-") or ("/" not in word and not word.endswith(".sh")):
            return None
        path = word if word.startswith("/") else str(PurePosixPath(self.workdir) / word)
        path = str(PurePosixPath(path))
        text = self.scripts.get(path)
        return (path, text) if text is not None else None

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


def _open(text: str) -> tuple[ImageSource, set[str]]:
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


def _pick(manifests: list[PlatformManifest]) -> PlatformManifest:
    for pm in manifests:
        if pm.platform in ("linux/amd64", "linux/amd64/v1"):
            return pm
    return manifests[0]


def read_image(text: str) -> ImageFiles:
    """Read the checked image's config and shell scripts (see the module docstring)."""
    source, repos = _open(text)
    with source:
        pm = _pick(source.platform_manifests())
        cfg = source.read_config(pm.config)
        files = _files_of(source, pm, cfg)
        repos |= {_repo(ImageRef.split(a)[0]) for a in _ref_names(source)}
        conf = as_dict(cfg.get("config"))
        env = dict(str(e).split("=", 1) for e in as_list(conf.get("Env")) if "=" in str(e))
        return ImageFiles(
            name=source.name, digests={pm.digest, *pm.parents}, repositories=repos,
            entrypoint=[str(x) for x in as_list(conf.get("Entrypoint"))],
            cmd=[str(x) for x in as_list(conf.get("Cmd"))], env=env,
            workdir=str(conf.get("WorkingDir") or "/"), scripts=files)


def _ref_names(source: ImageSource) -> list[str]:
    _, doc = source.top()
    out = []
    for m in doc.get("manifests") or []:
        ann = m.get("annotations") if isinstance(m, dict) else None
        if isinstance(ann, dict):
            out += [str(ann[k]) for k in ("io.containerd.image.name",
                                          "org.opencontainers.image.ref.name") if k in ann]
    return [n for n in out if "/" in n or ":" in n]


def _files_of(source: ImageSource, pm: PlatformManifest, cfg: dict[str, Any]) -> dict[str, str]:
    diff_ids = [str(d) for d in as_list(as_dict(cfg.get("rootfs")).get("diff_ids"))]
    files: dict[str, str] = {}
    for i, layer in enumerate(pm.layers):
        diff_id = diff_ids[i] if i < len(diff_ids) else None
        with source.open_layer(layer, diff_id=diff_id) as data:
            try:
                with tarfile.open(fileobj=data, mode="r|", bufsize=CHUNK) as tf:
                    for m in tf:
                        _apply(tf, m, files)
            except _TAR_ERRORS as e:
                raise InputError(f"{source.name}: layer {layer.digest} is not a readable tar "
                                 f"archive: {str(e)[:200]}",
                                 hint="the layer is corrupt; rebuild or re-export the image") from e
    return files


def _apply(tf: tarfile.TarFile, m: tarfile.TarInfo, files: dict[str, str]) -> None:
    """One layer entry: a whiteout deletes, a shell script is kept, anything else at a kept
    path replaces it."""
    path = "/" + m.name.lstrip("./").strip("/") if m.name not in (".", "./") else "/"
    base = PurePosixPath(path)
    if base.name == ".wh..wh..opq":
        prefix = str(base.parent).rstrip("/") + "/"
        for p in [p for p in files if p.startswith(prefix)]:
            del files[p]
        return
    if base.name.startswith(".wh."):
        gone = str(base.parent / base.name[4:])
        for p in [p for p in files if p == gone or p.startswith(gone + "/")]:
            del files[p]
        return
    files.pop(path, None)
    if not m.isreg() or m.size > MAX_SCRIPT or len(files) >= MAX_SCRIPTS:
        return
    if not path.endswith(".sh") and not (m.mode & 0o111):
        return
    f = tf.extractfile(m)
    if f is None:
        return
    raw = f.read(MAX_SCRIPT)
    if not path.endswith(".sh") and not _shebang_shell(raw):
        return
    text = raw.decode("utf-8", errors="replace")
    if "\0" not in text:
        files[path] = text


def _shebang_shell(raw: bytes) -> bool:
    head = raw.split(b"\n", 1)[0].decode("ascii", errors="replace")
    if not head.startswith("#!"):
        return False
    words = head[2:].split()
    prog = words[0].rsplit("/", 1)[-1] if words else ""
    if prog == "env" and len(words) > 1:
        prog = words[1]
    return prog in SHELLS
