"""An image's layers applied as the runtime unpacks them, in one linear pass.

containerd's unpacker (``archive.Apply``) is the model: each layer's tar entries are applied
in order onto one root:

* a member name is cleaned as Go's ``filepath.Clean`` cleans it (``opt/./x``, ``opt//x``,
  ``opt/../opt/x`` and ``./opt/x`` are all ``opt/x``; an absolute name starts at the image
  root); a name that climbs above the root (``../x``) is not applied, and said so;
* the directories above an entry are resolved through the symbolic links already in the
  root, inside the root (an absolute target starts at the image root, ``..`` stops there),
  as containerd's ``fs.RootPath`` does;
* ``.wh.<name>`` removes ``<name>`` (and all below it); ``.wh..wh..opq`` empties its
  directory of what lower layers put there, keeping what this layer adds; each is one
  dictionary operation (a layer full of whiteouts is as fast as any other);
* a hard link is the file its target is at that moment (its content is copied);
* a later layer's entry replaces the one below, whatever it was (the last layer's file is
  the one the container runs).

The root keeps every path's kind and, for the files worth reading, their text: what
:class:`Layers` is asked to keep (:meth:`Layers.wants`). Bounds (docs/limits.md):
:data:`MAX_LINK_HOPS` links per lookup, :data:`MAX_ENTRIES` paths in the root; each bound
reached is a :class:`~servelab.findings.CoverageNote`.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable, Iterator

from servelab.findings import CoverageNote

#: symbolic links followed while resolving one path (Linux's own limit is 40)
MAX_LINK_HOPS = 40
#: paths (files, folders, links) the applied root holds: past them, entries are not applied
MAX_ENTRIES = 2_000_000

DIR, FILE, LINK = "dir", "file", "link"
OPAQUE = ".wh..wh..opq"
WHITEOUT = ".wh."


class Node:
    """One path of the root: a folder (its children), a file (its text when read) or a link."""

    __slots__ = ("children", "kind", "layer", "member", "opaque", "origin", "size", "target",
                 "text")

    def __init__(self, kind: str, layer: int) -> None:
        self.kind = kind
        self.layer = layer
        self.children: dict[str, Node] = {}
        #: the text of a file that was read, else None
        self.text: str | None = None
        #: a file's size; a link's target
        self.size = 0
        self.target = ""
        #: the tar member name it came from, and that member's layer (to read it again
        #: when a link names it late)
        self.member = ""
        self.origin = layer
        #: the last layer that made this folder opaque
        self.opaque = -1


class Unsafe(Exception):
    """A path that climbs above the root, or links that loop."""


def clean(name: str) -> list[str] | None:
    """The parts of a member *name* cleaned as Go's filepath.Clean does, relative to the
    root; None when it climbs above the root."""
    absolute = name.startswith("/")
    parts: list[str] = []
    for p in name.split("/"):
        if p in {"", "."}:
            continue
        if p == "..":
            if parts:
                parts.pop()
            elif not absolute:
                return None
            continue
        parts.append(p)
    return parts


class Layers:
    """The root as the layers applied so far leave it; :meth:`apply` one layer's members."""

    def __init__(self, keep: Callable[[str, tarfile.TarInfo, bytes], bool]) -> None:
        self.root = Node(DIR, -1)
        self.layer = 0
        self.entries = 0
        #: keep(path, member, first bytes) -> whether to read this file's text
        self.keep = keep
        self.notes: list[CoverageNote] = []

    def note(self, what: str, why: str) -> None:
        if not any(n.what == what and n.why == why for n in self.notes[-8:]):
            self.notes.append(CoverageNote(what, why))

    # -- lookups -------------------------------------------------------------------------
    def resolve(self, parts: list[str], follow_last: bool = True) -> tuple[Node | None,
                                                                          list[str]]:
        """(the node, its real parts) that *parts* name, links followed inside the root
        (the last one only with *follow_last*); Unsafe when links loop."""
        todo = list(reversed(parts))
        done: list[Node] = [self.root]
        names: list[str] = []
        hops = 0
        while todo:
            part = todo.pop()
            if part in {"", "."}:
                continue
            if part == "..":
                if len(done) > 1:
                    done.pop()
                    names.pop()
                continue
            here = done[-1]
            child = here.children.get(part) if here.kind == DIR else None
            if child is None:
                return None, [*names, part, *reversed(todo)]
            if child.kind == LINK and (todo or follow_last):
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise Unsafe(f"more than {MAX_LINK_HOPS} symbolic links (a loop?)")
                target = child.target
                if target.startswith("/"):
                    done, names = [self.root], []
                todo += reversed([p for p in target.split("/") if p])
                continue
            done.append(child)
            names.append(part)
        return done[-1], names

    def lookup(self, path: str) -> tuple[str, Node] | None:
        """(real path, node) of the absolute *path*, links followed; None when absent;
        Unsafe when links loop."""
        node, names = self.resolve([p for p in path.split("/") if p])
        return ("/" + "/".join(names), node) if node is not None else None

    # -- applying ------------------------------------------------------------------------
    def parent(self, parts: list[str]) -> Node | None:
        """The folder that holds *parts*' last part, made as needed (containerd creates
        missing parents), links followed inside the root."""
        node, names = self.resolve(parts[:-1])
        if node is None:
            node = self.root
            for name in clean("/".join(names)) or []:
                nxt = node.children.get(name)
                if nxt is None or nxt.kind != DIR:
                    nxt = Node(DIR, self.layer)
                    node.children[name] = nxt
                node = nxt
        return node if node.kind == DIR else None

    def apply(self, tf: tarfile.TarFile, m: tarfile.TarInfo, shown: str) -> None:
        """Apply one member of layer :attr:`layer` (*shown*: the layer, for notes)."""
        parts = clean(m.name)
        if parts is None:
            self.note(f"layer {shown} entry {m.name[:200]!r}",
                      "it climbs above the image root: not applied (containerd refuses it)")
            return
        if not parts:
            return
        base = parts[-1]
        try:
            where = self.parent(parts)
        except Unsafe as e:
            self.note(f"layer {shown} entry {m.name[:200]!r}", f"{e}: not applied")
            return
        if where is None:
            return
        if base == OPAQUE:
            self._make_opaque(where)
            return
        if base.startswith(WHITEOUT):
            where.children.pop(base[len(WHITEOUT):], None)
            return
        if self.entries >= MAX_ENTRIES:
            self.note(f"layer {shown} past {MAX_ENTRIES} paths", f"servelab stops at "
                      f"{MAX_ENTRIES} paths of an image (MAX_ENTRIES): later entries not read")
            return
        node = self._node(tf, m, parts, shown)
        if node is None:
            return
        old = where.children.get(base)
        if node.kind == DIR and old is not None and old.kind == DIR:
            old.layer = self.layer  # a folder over a folder merges
            return
        self.entries += 1
        where.children[base] = node

    def _make_opaque(self, where: Node) -> None:
        """Empty *where* of what lower layers put there, once per layer (a layer of many
        markers for one folder looks at its children once)."""
        if where.opaque == self.layer:
            return
        where.opaque = self.layer
        for name in [n for n, c in where.children.items() if c.layer < self.layer]:
            del where.children[name]

    def _node(self, tf: tarfile.TarFile, m: tarfile.TarInfo, parts: list[str],
              shown: str) -> Node | None:
        if m.isdir():
            return Node(DIR, self.layer)
        if m.issym():
            node = Node(LINK, self.layer)
            node.target = m.linkname
            return node
        if m.islnk():
            return self._hardlink(m, shown)
        if not m.isreg():
            return Node(FILE, self.layer)  # a device, a fifo: nothing to read
        node = Node(FILE, self.layer)
        node.size = m.size
        node.member = m.name
        path = "/" + "/".join(parts)
        f = tf.extractfile(m) if m.size else None
        head = f.read(2) if f is not None else b""
        if f is not None and self.keep(path, m, head):
            raw = head + f.read(m.size - len(head))
            if b"\0" not in raw:
                node.text = raw.decode("utf-8", errors="replace")
        return node

    def _hardlink(self, m: tarfile.TarInfo, shown: str) -> Node | None:
        parts = clean(m.linkname)
        if parts is None:
            self.note(f"layer {shown} hard link {m.name[:200]!r}",
                      "its target climbs above the image root: not applied")
            return None
        try:
            target, _names = self.resolve(parts, follow_last=False)
        except Unsafe as e:
            self.note(f"layer {shown} hard link {m.name[:200]!r}", f"{e}: not applied")
            return None
        if target is None or target.kind != FILE:
            return None
        node = Node(FILE, self.layer)
        node.text, node.size = target.text, target.size
        node.member, node.origin = target.member, target.origin
        return node

    def files(self) -> Iterator[tuple[str, Node]]:
        """(path, node) of every file of the root, folders walked without recursion."""
        todo: list[tuple[str, Node]] = [("", self.root)]
        while todo:
            prefix, node = todo.pop()
            for name, child in node.children.items():
                path = f"{prefix}/{name}"
                if child.kind == DIR:
                    todo.append((path, child))
                elif child.kind == FILE:
                    yield path, child


def real_path(path: str, workdir: str) -> str:
    """*path* (absolute, or relative to *workdir*) cleaned."""
    return posixpath.normpath(posixpath.join(workdir or "/", path))
