"""Explain what differs between two images: index, manifest, config, layers, files in layers.

API::

    result = diff_images("a.oci.tar", "b.oci.tar", ignore_timestamps=False)   # -> DiffResult
    result = compare(source_a, source_b)          # two open servelab.image.oci.ImageSource readers
    result.verdict     # "identical" | "timestamps-only" | "encoding-only" | "differs"
    result.explanation()                          # short lines naming the root causes
    render(result, "text" | "json" | "markdown")  # the output of `servelab diff`

How: manifests are paired by platform; equal manifest digests end the comparison. Otherwise the
configs are compared field by field, and layers pairwise: equal digests are skipped, equal
``diff_ids`` (same uncompressed tar, other compression) are read through once to verify both
blobs and both diff_ids (the verdict "encoding-only" rests on them), and the remaining pairs
are streamed (gzip/zstd decompressed on the fly, both sides in parallel) and compared entry by
entry by path: type, content sha256, size, mode, uid/gid, owner names, mtime/atime/ctime, link
target, device numbers, xattrs and other PAX headers. Nothing is extracted: entries are hashed
as they stream by, and entry names never become files. Memory grows with the number of entries
in one layer pair (a few hundred bytes each), not with their size.

Trust: every blob read is verified while it streams (digest and declared size; the diff_id too
where a verdict rests on it: the "other compression" pairs), and decompression is capped
(:class:`servelab.image.blob.Limits`): a mismatch, a truncation, corrupt tar or compressed
data, or a cap is an InputError naming the blob (exit 2), never a difference. Workers check a
stop event between chunks: Ctrl-C or SIGTERM in the main thread ends them within a second.

Each change has a kind: ``timestamp`` (mtime/atime/ctime, config ``created`` and history dates,
``...created`` annotations), ``content`` (anything else a container would see), ``encoding``
(same files, other bytes: compression, entry order, tar headers) or ``derived`` (a digest that
changed because of the others). The verdict is the worst kind present.
"""

from __future__ import annotations

import difflib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from servelab.errors import InputError
from servelab.escape import terminal_text
from servelab.image.blob import Cancelled, Limits
from servelab.image.entries import (
    ENTRY_FIELDS,
    Entry,
    LayerScan,
    scan_layer,
    verify_layer,
)
from servelab.image.oci import Descriptor, ImageSource, PlatformManifest, open_image

T = TypeVar("T")
U = TypeVar("U")

KINDS = ("derived", "encoding", "timestamp", "content")
VERDICTS = {
    None: "identical",
    "derived": "encoding-only",
    "encoding": "encoding-only",
    "timestamp": "timestamps-only",
    "content": "differs",
}
TIMESTAMP_FIELDS = frozenset({"mtime", "atime", "ctime"})
TIMESTAMP_ANNOTATIONS = frozenset({"org.opencontainers.image.created",
                                   "buildkit/rewritten-timestamp"})


def printable(text: str, *, one_line: bool = False) -> str:
    """*text* safe to print, by the shared terminal neutraliser
    (:func:`servelab.escape.terminal_text`): bytes that were not UTF-8 (tar names) as
    ``\\xNN``, control and bidi characters and other lone surrogates escaped, an escape
    sequence shown (``\\x1b[31m``), never removed, so two names stay told apart; tabs and
    newlines kept unless *one_line*. Names and values from an image pass through it."""
    return terminal_text(text, one_line=one_line, show_escapes=True)


def _clean(v: Any) -> Any:
    """JSON-ready data with every string made printable."""
    if isinstance(v, str):
        return printable(v)
    if isinstance(v, dict):
        return {printable(str(k)): _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


@dataclass
class Change:
    """One difference. ``fields`` says what differs (for files, names from ENTRY_FIELDS)."""

    category: str  # index | manifest | config | layer | file
    subject: str
    kind: str  # derived | encoding | timestamp | content
    fields: list[str] = field(default_factory=list)
    a: Any = None
    b: Any = None
    layer: int | None = None
    instruction: str | None = None
    note: str = ""

    def describe(self) -> str:
        """One printable line: the subject and what differs."""
        return printable(self._describe(), one_line=True)

    def _describe(self) -> str:
        where = ""
        if self.category == "file" and self.layer is not None:
            where = f" (layer {self.layer}"
            where += f", {_short(self.instruction, 60)})" if self.instruction else ")"
        if self.note:
            return f"{self.subject}{where}: {self.note}"
        if isinstance(self.a, dict) and isinstance(self.b, dict):
            parts = [f"{f} {_show_field(f, self.a.get(f))} -> {_show_field(f, self.b.get(f))}"
                     for f in self.fields]
            return f"{self.subject}{where}: " + "; ".join(parts)
        what = ", ".join(self.fields) if self.fields else "value"
        verb = "differs" if len(self.fields) <= 1 else "differ"
        return f"{self.subject}{where}: {what} {verb}: {_show(self.a)} -> {_show(self.b)}"

    def __post_init__(self) -> None:
        self.subject = printable(self.subject, one_line=True)
        self.note = printable(self.note, one_line=True)
        if self.instruction is not None:
            self.instruction = printable(self.instruction, one_line=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"category": self.category, "subject": self.subject,
                               "kind": self.kind, "fields": list(self.fields),
                               "a": _jsonable(self.a), "b": _jsonable(self.b)}
        if self.layer is not None:
            out["layer"] = self.layer
        if self.instruction:
            out["instruction"] = self.instruction
        if self.note:
            out["note"] = self.note
        return _clean(out)  # type: ignore[no-any-return]


@dataclass
class LayerStat:
    #: the layer's position in B (in A for a removed layer): what "layer N" means
    index: int
    a_digest: str | None
    b_digest: str | None
    instruction: str | None
    status: str  # same | differs | encoding | added | removed
    #: its entries were read and compared
    opened: bool = False
    #: both blobs were read through and their digests and sizes checked (and the diff_id of
    #: an "encoding" pair)
    verified: bool = False
    entries_a: int = 0
    entries_b: int = 0
    changed_entries: int = 0
    #: the positions in A and in B (they differ once a layer was inserted or removed)
    a_index: int | None = None
    b_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _clean(dict(self.__dict__))  # type: ignore[no-any-return]


@dataclass
class DiffResult:
    a: str
    b: str
    a_manifest: str | None
    b_manifest: str | None
    platform: str | None
    changes: list[Change]
    layers: list[LayerStat]
    ignore_timestamps: bool = False
    #: changes not listed because of max_entries
    omitted: int = 0

    def __post_init__(self) -> None:
        self.a, self.b = printable(self.a, one_line=True), printable(self.b, one_line=True)
        if self.platform is not None:
            self.platform = printable(self.platform, one_line=True)

    @property
    def worst(self) -> str | None:
        kinds = {c.kind for c in self.changes}
        return max(kinds, key=KINDS.index) if kinds else None

    @property
    def verdict(self) -> str:
        return VERDICTS[self.worst]

    @property
    def equivalent(self) -> bool:
        """No difference, or (with ignore_timestamps) none a container would notice."""
        if self.ignore_timestamps:
            return self.verdict != "differs"
        return self.verdict == "identical"

    def visible(self) -> list[Change]:
        """The changes to show: root causes first; timestamps hidden with ignore_timestamps."""
        out = [c for c in self.changes if not (self.ignore_timestamps and c.kind == "timestamp")]
        return sorted(out, key=lambda c: -KINDS.index(c.kind))

    def explanation(self, limit: int = 10) -> list[str]:
        """Short lines naming what makes the images differ, worst first."""
        roots = [c for c in self.visible() if c.kind != "derived"]
        lines = [c.describe() for c in roots[:limit]]
        hint = _bytecode_cause(roots)
        if hint:
            lines.insert(0, hint)
        if len(roots) > limit:
            lines.append(f"... and {len(roots) - limit} more")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "platform": self.platform,
            "a_manifest": self.a_manifest, "b_manifest": self.b_manifest,
            "verdict": self.verdict, "equivalent": self.equivalent,
            "ignore_timestamps": self.ignore_timestamps,
            "explanation": self.explanation(),
            "layers": [x.to_dict() for x in self.layers],
            "changes": [c.to_dict() for c in self.visible()],
            "omitted_changes": self.omitted,
        }


def _bytecode_cause(roots: list[Change]) -> str | None:
    """The cause when most of what differs is Python bytecode: a ``.pyc`` written with the
    default (timestamp) invalidation holds its source's mtime at install, so every build
    writes other bytes although the files' own times are clamped to SOURCE_DATE_EPOCH."""
    files = [c for c in roots if c.category == "file"]
    pyc = [c for c in files if c.subject.endswith(".pyc") and "content" in c.fields]
    if not pyc or 2 * len(pyc) < len(files):
        return None
    return (f"{len(pyc)} of the {len(files)} files that differ are Python bytecode (.pyc): "
            "its header holds the source's time at install, which differs on every build. "
            "Fix: declare `ARG SOURCE_DATE_EPOCH` before the install (pip and compileall "
            "then write hash-based .pyc, the same bytes each build), or install with "
            "`pip install --no-compile` (or PYTHONDONTWRITEBYTECODE=1)")


def _short(text: str | None, n: int) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 3] + "..."


def _show(v: Any) -> str:
    if isinstance(v, bytes):
        return v.hex()[:12]
    if v is None:
        return "(none)"
    return _short(json.dumps(_jsonable(v), ensure_ascii=False), 80)


def _show_field(name: str, v: Any) -> str:
    if name in TIMESTAMP_FIELDS and isinstance(v, str):
        try:
            when = datetime.fromtimestamp(float(v), UTC)
        except (ValueError, OverflowError, OSError):
            return v
        return when.isoformat(timespec="microseconds" if "." in v else "seconds")
    if name == "mode" and isinstance(v, int):
        return oct(v)
    return _show(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return "sha256:" + v.hex()
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


# ---------------------------------------------------------------------------- tar entries


def _entry_changes(path: str, ea: Entry | None, eb: Entry | None, layer: int,
                   instr: str | None) -> Change | None:
    if ea is None:
        return Change("file", path, "content", ["added"], None, eb[0] if eb else None, layer,
                      instr, note=f"{eb[0] if eb else 'entry'} only in B")
    if eb is None:
        return Change("file", path, "content", ["removed"], ea[0], None, layer, instr,
                      note=f"{ea[0]} only in A")
    diff = [name for name, x, y in zip(ENTRY_FIELDS, ea, eb, strict=True) if x != y]
    if not diff:
        return None
    kind = "timestamp" if set(diff) <= TIMESTAMP_FIELDS else "content"
    idx = [ENTRY_FIELDS.index(d) for d in diff]
    a = {ENTRY_FIELDS[i]: ea[i] for i in idx}
    b = {ENTRY_FIELDS[i]: eb[i] for i in idx}
    note = ""
    if "content" in diff:
        note = (f"content differs (sha256 {_show(ea[1])} -> {_show(eb[1])}, size {ea[2]} -> "
                f"{eb[2]})")
        rest = [d for d in diff if d not in ("content", "size")]
        if rest:
            note += "; also " + ", ".join(rest)
    return Change("file", path, kind, diff, a, b, layer, instr, note)


def compare_entries(sa: LayerScan, sb: LayerScan, layer: int, instr: str | None) -> list[Change]:
    """Per-path changes between two scanned layers; order/encoding notes when files match."""
    out: list[Change] = []
    for path in sorted(sa.entries.keys() | sb.entries.keys()):
        c = _entry_changes(path, sa.entries.get(path), sb.entries.get(path), layer, instr)
        if c is not None:
            out.append(c)
    if not out:
        note = ("same entries in a different order" if sa.order != sb.order
                else "same entries, different tar encoding (headers or padding)")
        out.append(Change("layer", f"layer {layer}", "encoding", ["tar"], layer=layer,
                          instruction=instr, note=note))
    return out


# ---------------------------------------------------------------------------- config, manifest


def _config_changes(ca: dict[str, Any], cb: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    for key in sorted(ca.keys() | cb.keys()):
        if key in ("config", "history", "rootfs"):
            continue
        if ca.get(key) != cb.get(key):
            kind = "timestamp" if key == "created" else "content"
            out.append(Change("config", f"config.{key}", kind, [key], ca.get(key), cb.get(key)))
    out += _container_config_changes(ca.get("config") or {}, cb.get("config") or {})
    out += _history_changes(ca.get("history") or [], cb.get("history") or [])
    return out


def _container_config_changes(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    for key in sorted(a.keys() | b.keys()):
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        if key == "Labels" and isinstance(va or {}, dict) and isinstance(vb or {}, dict):
            la, lb = va or {}, vb or {}
            for lk in sorted(la.keys() | lb.keys()):
                if la.get(lk) != lb.get(lk):
                    kind = "timestamp" if lk in TIMESTAMP_ANNOTATIONS else "content"
                    out.append(Change("config", f"config.Labels[{lk}]", kind, ["label"],
                                      la.get(lk), lb.get(lk)))
            continue
        out.append(Change("config", f"config.{key}", "content", [key], va, vb))
    return out


def _history_changes(ha: list[Any], hb: list[Any]) -> list[Change]:
    out: list[Change] = []
    for i in range(max(len(ha), len(hb))):
        ea = ha[i] if i < len(ha) and isinstance(ha[i], dict) else None
        eb = hb[i] if i < len(hb) and isinstance(hb[i], dict) else None
        if ea is None or eb is None:
            e = eb if ea is None else ea
            out.append(Change("config", f"history[{i}]", "content",
                              ["added" if ea is None else "removed"], ea, eb,
                              note=f"history entry only in {'B' if ea is None else 'A'}: "
                              f"{_short((e or {}).get('created_by') or '(no created_by)', 60)}"))
            continue
        for key in sorted(ea.keys() | eb.keys()):
            if ea.get(key) != eb.get(key):
                kind = "timestamp" if key == "created" else "content"
                out.append(Change("config", f"history[{i}].{key}", kind, [key],
                                  ea.get(key), eb.get(key)))
    return out


def _annotation_changes(subject: str, a: dict[str, str], b: dict[str, str],
                        category: str = "manifest") -> list[Change]:
    out: list[Change] = []
    for k in sorted(a.keys() | b.keys()):
        if a.get(k) != b.get(k):
            kind = "timestamp" if k in TIMESTAMP_ANNOTATIONS else "content"
            out.append(Change(category, f"{subject}.annotations[{k}]", kind, ["annotation"],
                              a.get(k), b.get(k)))
    return out


def layer_instructions(config: dict[str, Any], n_layers: int) -> list[str | None]:
    """The history line (``created_by``, else comment) that made each layer, in order."""
    out: list[str | None] = []
    for h in config.get("history") or []:
        if isinstance(h, dict) and not h.get("empty_layer"):
            out.append(h.get("created_by") or h.get("comment") or None)
    out += [None] * (n_layers - len(out))
    return out[:n_layers]


# ---------------------------------------------------------------------------- the comparison


def _pair(ma: list[PlatformManifest], mb: list[PlatformManifest], platform: str | None
          ) -> tuple[PlatformManifest, PlatformManifest, list[Change]]:
    notes: list[Change] = []
    pa = {m.platform: m for m in ma}
    pb = {m.platform: m for m in mb}
    if set(pa) != set(pb):
        notes.append(Change("index", "platforms", "content", ["platforms"],
                            sorted(pa), sorted(pb)))
    if platform is not None:
        if platform not in pa or platform not in pb:
            raise InputError(f"platform {platform} is not in both images "
                             f"(A: {', '.join(sorted(pa))}; B: {', '.join(sorted(pb))})",
                             hint="choose one of the platforms both images have")
        return pa[platform], pb[platform], notes
    common = sorted(set(pa) & set(pb))
    if common:
        return pa[common[0]], pb[common[0]], notes
    if len(ma) == 1 and len(mb) == 1:
        return ma[0], mb[0], notes
    raise InputError("the two images share no platform",
                     hint="compare one platform of each with --platform")


def _manifest_changes(a: PlatformManifest, b: PlatformManifest) -> list[Change]:
    out = [Change("manifest", "manifest", "derived", ["digest"], a.digest, b.digest)]
    if a.manifest.get("mediaType") != b.manifest.get("mediaType"):
        out.append(Change("manifest", "manifest.mediaType", "encoding", ["mediaType"],
                          a.manifest.get("mediaType"), b.manifest.get("mediaType")))
    if a.config.digest != b.config.digest:
        out.append(Change("manifest", "config", "derived", ["digest"],
                          a.config.digest, b.config.digest))
    out += _annotation_changes("manifest", a.manifest.get("annotations") or {},
                               b.manifest.get("annotations") or {})
    return out


def align_layers(a_keys: list[str], b_keys: list[str]) -> list[tuple[int | None, int | None]]:
    """Pair A's layers with B's by content (longest matching runs of keys), not by position:
    a layer inserted or removed in the middle leaves the layers after it paired. Unmatched
    runs facing each other pair in order (a layer that changed); the rest are added/removed."""
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=a_keys, b=b_keys, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        n = min(i2 - i1, j2 - j1) if tag in ("equal", "replace") else 0
        pairs += [(i1 + k, j1 + k) for k in range(n)]
        pairs += [(i, None) for i in range(i1 + n, i2)]
        pairs += [(None, j) for j in range(j1 + n, j2)]
    return pairs


def _diff_ids(m: PlatformManifest, config: dict[str, Any]) -> list[str] | None:
    """The config's diff_ids when there is one per layer."""
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
    return [str(d) for d in diff_ids] if len(diff_ids) == len(m.layers) else None


def _layer_keys(m: PlatformManifest, config: dict[str, Any]) -> list[str]:
    """Each layer's uncompressed digest (diff_id) when the config has them, else its digest."""
    return _diff_ids(m, config) or [x.digest for x in m.layers]


def _layer_pairs(a: PlatformManifest, b: PlatformManifest, ca: dict[str, Any],
                 cb: dict[str, Any]) -> tuple[list[LayerStat], list[Change], list[int]]:
    """Layer stats, layer-level changes, and the rows (indexes into the stats) to read:
    status ``differs`` to open, ``encoding`` to verify, ``same`` (one blob whose configs
    claim two diff_ids) to verify against each claim."""
    ia = layer_instructions(ca, len(a.layers))
    ib = layer_instructions(cb, len(b.layers))
    ka, kb = _layer_keys(a, ca), _layer_keys(b, cb)
    stats: list[LayerStat] = []
    changes: list[Change] = []
    to_open: list[int] = []
    for ai, bi in align_layers(ka, kb):
        la = a.layers[ai] if ai is not None else None
        lb = b.layers[bi] if bi is not None else None
        instr = (ib[bi] if bi is not None else None) or (ia[ai] if ai is not None else None)
        i = bi if bi is not None else ai if ai is not None else 0
        st = LayerStat(i, la.digest if la else None, lb.digest if lb else None, instr, "same",
                       a_index=ai, b_index=bi)
        stats.append(st)
        if la is None or lb is None or ai is None or bi is None:
            st.status = "added" if la is None else "removed"
            where = f"layer {i}" if la is None else f"layer {i} of A"
            changes.append(Change("layer", where, "content", [st.status],
                                  st.a_digest, st.b_digest, i, instr,
                                  note=f"layer {st.status} ({_short(instr, 60) or 'no history'})"))
            continue
        if la.digest == lb.digest:
            if ka[ai] != kb[bi]:  # one blob, two diff_ids: one config lies; read it through
                to_open.append(len(stats) - 1)
            continue
        changes.append(Change("layer", f"layer {i}", "derived", ["digest"], la.digest,
                              lb.digest, i, instr))
        changes += _annotation_changes(f"layer {i}", la.annotations, lb.annotations, "layer")
        if ka[ai] == kb[bi]:  # equal diff_ids (equal digests were handled above)
            st.status = "encoding"
            changes.append(Change("layer", f"layer {i}", "encoding", ["compression"],
                                  la.media_type, lb.media_type, i, instr,
                                  note="same uncompressed tar (diff_id), other compression"))
            to_open.append(len(stats) - 1)
            continue
        st.status = "differs"
        to_open.append(len(stats) - 1)
    return stats, changes, to_open


@dataclass
class _Side:
    """One image of the comparison: its reader, manifest and the config's diff_ids."""

    source: ImageSource
    manifest: PlatformManifest
    diff_ids: list[str] | None

    def layer(self, i: int) -> tuple[Descriptor, str | None]:
        return self.manifest.layers[i], self.diff_ids[i] if self.diff_ids else None


@dataclass
class _Run:
    """What every layer read of one comparison shares: caps and the stop event."""

    limits: Limits
    stop: threading.Event = field(default_factory=threading.Event)


def compare(a: ImageSource, b: ImageSource, *, platform: str | None = None,
            ignore_timestamps: bool = False, max_entries: int = 1000,
            limits: Limits | None = None) -> DiffResult:
    """What differs between images *a* and *b* (see the module docstring)."""
    ma, mb, notes = _pair(a.platform_manifests(), b.platform_manifests(), platform)
    result = DiffResult(a.name, b.name, ma.digest, mb.digest, ma.platform, list(notes), [],
                        ignore_timestamps)
    if ma.digest == mb.digest:
        return result
    result.changes += _manifest_changes(ma, mb)
    ca = a.read_config(ma.config)
    cb = b.read_config(mb.config)
    if ma.config.digest != mb.config.digest:
        result.changes += _config_changes(ca, cb)
    stats, changes, to_read = _layer_pairs(ma, mb, ca, cb)
    result.layers = stats
    result.changes += changes
    run = _Run(limits or Limits.from_env())
    sa, sb = _Side(a, ma, _diff_ids(ma, ca)), _Side(b, mb, _diff_ids(mb, cb))
    for i in to_read:
        if stats[i].status in ("encoding", "same"):
            _verify_pair(sa, sb, stats[i], run)
            continue
        file_changes = _compare_layer(sa, sb, stats[i], run)
        result.omitted += max(0, len(file_changes) - max_entries)
        result.changes += file_changes[:max_entries]
    return result


#: layer pairs smaller than this (compressed, together) are read one after the other
PARALLEL_MIN_BYTES = 8 << 20
#: how long the main thread waits for the workers to see the stop event before it moves on
STOP_WAIT_S = 0.5


def _both(fa: Callable[[], T], fb: Callable[[], U], stop: threading.Event,
          parallel: bool) -> tuple[T, U]:
    """``(fa(), fb())``, in two worker threads when *parallel*.

    The main thread waits in short slices, so Ctrl-C and SIGTERM reach it at once; then it sets
    *stop* (the workers raise :class:`Cancelled` at their next chunk) and re-raises. A worker's
    error stops the other one too. Workers are daemon threads: one stuck in a read (a stalled
    registry) cannot hold the process after STOP_WAIT_S."""
    if not parallel:
        return fa(), fb()
    out: list[Any] = [None, None]
    errors: list[BaseException | None] = [None, None]

    def work(i: int, fn: Callable[[], Any]) -> None:
        try:
            out[i] = fn()
        except BaseException as e:
            errors[i] = e
            stop.set()

    threads = [threading.Thread(target=work, args=(i, fn), name=f"servelab-diff-{i}",
                                daemon=True) for i, fn in enumerate((fa, fb))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.05)
    except BaseException:
        stop.set()
        deadline = time.monotonic() + STOP_WAIT_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        raise
    real = [e for e in errors if e is not None and not isinstance(e, Cancelled)]
    if real:
        raise real[0]
    if any(errors):
        raise Cancelled
    return out[0], out[1]


def _layers_of(sa: _Side, sb: _Side, st: LayerStat
               ) -> tuple[tuple[Descriptor, str | None], tuple[Descriptor, str | None]]:
    return (sa.layer(st.a_index if st.a_index is not None else st.index),
            sb.layer(st.b_index if st.b_index is not None else st.index))


def _verify_pair(sa: _Side, sb: _Side, st: LayerStat, run: _Run) -> None:
    """Both blobs of a layer reported as "same tar, other compression", read through: their
    digests, sizes and the shared diff_id must hold, else InputError (never encoding-only)."""
    (la, ia), (lb, ib) = _layers_of(sa, sb, st)
    _both(lambda: verify_layer(sa.source, la, diff_id=ia, limits=run.limits, stop=run.stop),
          lambda: verify_layer(sb.source, lb, diff_id=ib, limits=run.limits, stop=run.stop),
          run.stop, la.size + lb.size >= PARALLEL_MIN_BYTES)
    st.verified = True


def _compare_layer(sa: _Side, sb: _Side, st: LayerStat, run: _Run) -> list[Change]:
    """Both layers scanned (their digests and sizes verified in the same pass; their diff_ids
    are not: the verdict "differs" does not rest on them, and hashing the uncompressed bytes
    too would cost about a tenth more time)."""
    (la, _), (lb, _) = _layers_of(sa, sb, st)
    scan_a, scan_b = _both(
        lambda: scan_layer(sa.source, la, limits=run.limits, stop=run.stop),
        lambda: scan_layer(sb.source, lb, limits=run.limits, stop=run.stop),
        run.stop, la.size + lb.size >= PARALLEL_MIN_BYTES)
    st.opened = st.verified = True
    st.entries_a, st.entries_b = scan_a.count, scan_b.count
    changes = compare_entries(scan_a, scan_b, st.index, st.instruction)
    st.changed_entries = sum(1 for c in changes if c.category == "file")
    return changes


def diff_images(a: str, b: str, **kwargs: Any) -> DiffResult:
    """Open *a* and *b* (archives, layout dirs or references) and :func:`compare` them."""
    with open_image(a) as ia, open_image(b) as ib:
        return compare(ia, ib, **kwargs)


# ---------------------------------------------------------------------------- output

VERDICT_TEXT = {
    "identical": "identical (same manifest digest)",
    "timestamps-only": "only timestamps differ: the files and settings are the same",
    "encoding-only": "same files and settings, different bytes (compression or tar encoding)",
    "differs": "content differs",
}
