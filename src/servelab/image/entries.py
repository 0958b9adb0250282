"""A layer's tar entries, read in one verified pass: every entry by path (the last one wins,
as when a layer is applied) with its type, content sha256, size, mode, owner, times, link
target, device numbers, xattrs and other PAX headers. Nothing is extracted and entry names
never become files. :mod:`servelab.image.diff` compares two of them.
"""

from __future__ import annotations

import hashlib
import sys
import tarfile
import threading
from dataclasses import dataclass
from typing import Any

from servelab.errors import InputError
from servelab.image.blob import Limits
from servelab.image.oci import CHUNK, Descriptor, ImageSource

ENTRY_FIELDS = ("type", "content", "size", "mode", "uid", "gid", "owner-names", "mtime",
                "atime", "ctime", "link-target", "device", "xattrs", "pax-headers")
_PAX_OWN = frozenset({"path", "linkpath", "size", "uid", "gid", "uname", "gname", "mtime",
                      "atime", "ctime"})
_XATTR_PREFIXES = ("SCHILY.xattr.", "LIBARCHIVE.xattr.")
_TYPE_NAMES = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.CONTTYPE: "file",
               tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink",
               tarfile.CHRTYPE: "char-device", tarfile.BLKTYPE: "block-device",
               tarfile.FIFOTYPE: "fifo"}

#: per entry: type, content sha256, size, mode, uid, gid, (uname, gname), mtime, atime, ctime,
#: link target, (devmajor, devminor), xattrs, other pax headers -- in ENTRY_FIELDS order
Entry = tuple[Any, ...]


def _norm(name: str) -> str:
    n = name
    while n.startswith("./"):
        n = n[2:]
    return "/" + n.strip("/")


def _content_hash(tf: tarfile.TarFile, m: tarfile.TarInfo) -> bytes | None:
    if not m.isreg():
        return None
    f = tf.extractfile(m)
    if f is None:
        return None
    h = hashlib.sha256()
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return h.digest()
        h.update(chunk)


def _pax_time(m: tarfile.TarInfo, key: str) -> str | None:
    v = m.pax_headers.get(key)
    if v is None and key == "mtime":
        return str(int(m.mtime))
    return v


def _entry(tf: tarfile.TarFile, m: tarfile.TarInfo) -> Entry:
    pax = m.pax_headers
    xattrs = tuple(sorted((k, v) for k, v in pax.items() if k.startswith(_XATTR_PREFIXES)))
    other = tuple(sorted((k, v) for k, v in pax.items()
                         if k not in _PAX_OWN and not k.startswith(_XATTR_PREFIXES)))
    dev = (m.devmajor, m.devminor) if m.ischr() or m.isblk() else None
    return (_TYPE_NAMES.get(m.type, repr(m.type)), _content_hash(tf, m), m.size, m.mode,
            m.uid, m.gid, (sys.intern(m.uname), sys.intern(m.gname)),
            _pax_time(m, "mtime"), _pax_time(m, "atime"), _pax_time(m, "ctime"),
            m.linkname or None, dev, xattrs or None, other or None)


@dataclass
class LayerScan:
    """A layer's entries by path, the hash of their order, and how many there were."""

    entries: dict[str, Entry]
    order: bytes
    count: int


#: what a corrupt tar stream raises inside tarfile
_TAR_ERRORS = (tarfile.TarError, EOFError, ValueError, OverflowError, UnicodeError)


def scan_layer(source: ImageSource, layer: Descriptor, *, limits: Limits | None = None,
               stop: threading.Event | None = None, diff_id: str | None = None) -> LayerScan:
    """Every entry of a layer by path (the last one wins, as when a layer is applied).

    One pass: the blob is verified (digest, declared size, *diff_id* when given) and capped
    (*limits*) as its entries are hashed."""
    entries: dict[str, Entry] = {}
    order = hashlib.sha256()
    count = 0
    with source.open_layer(layer, limits=limits, stop=stop, diff_id=diff_id) as data:
        try:
            with tarfile.open(fileobj=data, mode="r|", bufsize=CHUNK) as tf:
                for m in tf:
                    path = _norm(m.name)
                    entries[path] = _entry(tf, m)
                    order.update(path.encode("utf-8", "surrogateescape") + b"\0")
                    count += 1
        except _TAR_ERRORS as e:
            raise InputError(f"{source.name}: layer {layer.digest} is not a readable tar "
                             f"archive: {str(e)[:200]}",
                             hint="the layer is corrupt; rebuild or re-export the image") from e
    return LayerScan(entries, order.digest(), count)


def verify_layer(source: ImageSource, layer: Descriptor, *, diff_id: str | None,
                 limits: Limits | None = None, stop: threading.Event | None = None) -> None:
    """Read *layer* through: InputError unless its digest, size and *diff_id* hold."""
    with source.open_layer(layer, limits=limits, stop=stop, diff_id=diff_id):
        pass  # the end of the block reads the rest and checks it
