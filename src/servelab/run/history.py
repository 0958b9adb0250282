"""``servelab history``: the trend of many past runs of one experiment, newest first.

Reads the ``summary.json`` of past runs (run directories, folders of downloaded workflow
artifacts) and history files (JSON Lines, one :data:`ENTRY_KIND` object a line, checked
against ``schemas/history.schema.json``). Every file goes through the safe reader
(:mod:`servelab.textio`); nothing bad is dropped silently: a file or line that cannot be used
is listed with its reason, a run read twice is counted once (and said), runs of other
experiments are listed apart. The result is typed (:class:`History`); its text, Markdown,
JSON, Mermaid and SVG are made by :mod:`servelab.run.render` and :mod:`servelab.run.svg`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.run import aggregate
from servelab.run.aggregate import _get
from servelab.run.merge import (
    BUILD_INPUTS,
    differing_inputs,
    recorded_inputs,
    unknown_inputs,
)

ENTRY_KIND = "servelab-history-entry"
ARMS = ("control", "treatment")
#: summary.json and history files read from the directories given (a year of nightly runs
#: with their artifacts is far below it).
MAX_FILES = 10_000
HISTORY_SUFFIX = ".jsonl"
#: skipped files and lines (and duplicate runs) named one by one in every output; the rest
#: are counted (a history file of 100 000 bad lines is a short report, not 100 000 lines)
SET_ASIDE_SHOWN = 20


@dataclass(frozen=True)
class Skipped:
    """A file, or a line of a history file, that was not used, and why."""

    source: str
    reason: str


@dataclass(frozen=True)
class Entry:
    """One past run, condensed: what a history file holds on one line."""

    data: dict[str, Any]
    source: str
    #: (where, why) of each result its summary.json listed twice, counted once
    repeated: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.experiment, str(self.data["run"]["id"]))

    @property
    def experiment(self) -> str:
        return str(self.data["experiment"]["name"])

    @property
    def started_at(self) -> str:
        return str(self.data["run"]["started_at"])

    def arm(self, name: str) -> dict[str, Any] | None:
        arm: dict[str, Any] | None = self.data["arms"].get(name)
        return arm


@dataclass(frozen=True)
class Change:
    """The first run of a new digest of one arm, or a break: the digests before and after
    (an empty list: unknown, the build failed or recorded none), and the recorded inputs that
    differ from the run before (none: the build is not reproducible) or that are unknown on
    one side (then nothing is said about reproducibility)."""

    arm: str
    before: list[str]
    after: list[str]
    inputs: list[str]
    unknown: list[str] = field(default_factory=list)

    @property
    def build_inputs(self) -> list[str]:
        return [i for i in self.inputs if i in BUILD_INPUTS]

    @property
    def digest_unknown(self) -> bool:
        return not self.before or not self.after

    @property
    def reading(self) -> str:
        if not self.after:
            return "digest unknown: this run recorded no digest (its build failed or was " \
                "skipped); not the same as the run before"
        if not self.before:
            return "the run before recorded no digest (unknown): not comparable to it"
        build = self.build_inputs
        other = [i for i in self.inputs if i not in BUILD_INPUTS]
        also = f" (also changed, not a build input: {', '.join(other)})" if other else ""
        unknown = [i for i in self.unknown if i in BUILD_INPUTS]
        if unknown:
            changed = f"inputs changed: {', '.join(build)}; " if build else ""
            return f"{changed}inputs unknown (not recorded): {', '.join(unknown)}" + also
        if not build:
            return "not reproducible: same build inputs, different digest" + also
        return "inputs changed: " + ", ".join(build) + also

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "before": self.before or None, "after": self.after or None,
                "digest_unknown": self.digest_unknown,
                "inputs_that_differ": self.inputs, "build_inputs_that_differ": self.build_inputs,
                "inputs_unknown": self.unknown, "reading": self.reading}


@dataclass(frozen=True)
class Row:
    entry: Entry
    changes: list[Change]


@dataclass
class History:
    """The trend of one experiment, newest run first, and everything that was set aside."""

    experiment: str | None
    rows: list[Row]
    others: list[Entry] = field(default_factory=list)
    duplicates: list[Skipped] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)

    def entries(self) -> list[Entry]:
        """Every run read (this experiment's and the others'), each once."""
        return [r.entry for r in self.rows] + self.others

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "experiment": self.experiment,
            "runs": [dict(r.entry.data, source=r.entry.source,
                          digest_changes=[c.to_dict() for c in r.changes]) for r in self.rows],
            "other_experiments": [dict(e.data, source=e.source) for e in self.others],
            "duplicates": [{"source": d.source, "reason": d.reason}
                           for d in self.duplicates[:SET_ASIDE_SHOWN]],
            "duplicates_total": len(self.duplicates),
            "skipped": [{"source": s.source, "reason": s.reason}
                        for s in self.skipped[:SET_ASIDE_SHOWN]],
            "skipped_total": len(self.skipped),
        }


# ------------------------------------------------------------------------------ reading


def _files(path: Path) -> list[Path]:
    """The summary.json and history files a path names: itself, or those under a directory
    (run directories, a folder of downloaded workflow artifacts)."""
    if not path.exists() and not path.is_symlink():
        raise InputError("no such file or directory", file=str(path),
                         hint="give run directories, summary.json files or history files")
    if not path.is_dir():
        return [path]
    found: list[Path] = []
    for p in sorted(path.rglob("*")):  # symbolic links to directories are not followed
        if p.name == "summary.json" or _is_history_name(p.name):
            found.append(p)
            if len(found) > MAX_FILES:
                raise InputError(f"more than {MAX_FILES} summary.json and history files under "
                                 "this directory", file=str(path),
                                 hint="point at fewer runs, or fold them into a history file")
    return found


def _is_history_name(name: str) -> bool:
    """In a directory, history files are ``history.jsonl`` or ``*.history.jsonl``: a run's
    folders hold other JSON Lines (``probe-events.jsonl``) that are not; a file named on the
    command line is read as a history file when it ends in ``.jsonl``."""
    return name == "history" + HISTORY_SUFFIX or name.endswith(".history" + HISTORY_SUFFIX)


def _read(path: Path) -> tuple[list[Entry], list[Skipped]]:
    from servelab import textio

    try:
        text = textio.read_text(path, max_bytes=textio.JSON_BYTES,
                                what="summary.json or history file")
    except InputError as e:
        return [], [Skipped(str(path), _reason(e))]
    if path.name.endswith(HISTORY_SUFFIX):
        return _history_lines(path, text)
    try:
        data = textio.loads_json(text, str(path))
    except InputError as e:
        return [], [Skipped(str(path), _reason(e))]
    got = entry_from_summary(data, str(path))
    return ([got], []) if isinstance(got, Entry) else ([], [got])


def _reason(e: InputError, one_line: bool = False) -> str:
    """The message of *e* without the file name it starts with (the source is named beside
    it), with the line and column where the reader found them, and the fix."""
    text = e.message
    if e.file and text.startswith(e.file):
        text = text[len(e.file):].lstrip(":0123456789 ")
    at = [f"line {e.line}"] if e.line and not one_line else []
    at += [f"column {e.column}"] if e.column else []
    fix = f" (fix: {e.hint})" if e.hint else ""
    return (", ".join(at) + ": " if at else "") + text + fix


def _history_lines(path: Path, text: str) -> tuple[list[Entry], list[Skipped]]:
    from servelab import textio
    from servelab.spec import out_of_range
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    # JSON Lines end a line at LF (CRLF too) only: str.splitlines would also split inside a
    # string holding U+2028, U+0085 or \x1c, which another tool may have written raw
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.removesuffix("\r")
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            data = textio.loads_json(line, where)
        except InputError as e:
            skipped.append(Skipped(where, _reason(e, one_line=True)))
            continue
        if isinstance(data, dict) and data.get("schemaVersion") != 1:
            skipped.append(Skipped(where, _other_version(data.get("schemaVersion"))))
            continue
        problems = _problems("history", data)
        if problems:
            skipped.append(Skipped(where, "not a history entry: " + problems))
            continue
        big = out_of_range(data)
        if big is not None:
            skipped.append(Skipped(where, f"a number out of range: {big.lstrip('/')}"))
            continue
        entries.append(Entry(data, where))
    return entries, skipped


def _other_version(v: Any) -> str:
    return (f"schemaVersion {json.dumps(v)[:40]}: this servelab reads version 1 "
            "(written by another servelab version)")


def _problems(schema: str, data: Any) -> str:
    from servelab.spec import schema_errors

    errors = schema_errors(schema, data)
    if not errors:
        return ""
    e = errors[0]
    where = "/".join(map(str, e.absolute_path)) or "$"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {str(e.message)[:200]}{more}"


#: What history needs of a summary.json beyond its results (servelab run writes them all).
NEEDED = (("run", "id"), ("run", "started_at"), ("experiment", "name"), ("verdict",))


def entry_from_summary(data: Any, source: str) -> Entry | Skipped:
    """The history entry of one run's summary.json, or why it cannot be one."""
    from servelab.run.results import dedupe_results, validate_result
    if not isinstance(data, dict):
        return Skipped(source, "not a JSON object")
    if data.get("schemaVersion", 1) != 1:
        return Skipped(source, _other_version(data.get("schemaVersion")))
    problems = _problems("summary", data)
    if problems:
        return Skipped(source, "not a summary.json of servelab: " + problems)
    if "groups" in data and "verdict" not in data:
        return Skipped(source, "a merged report of several runs (servelab report --out), "
                       "not one run: give the runs themselves")
    missing = [".".join(k) for k in NEEDED if not isinstance(_get(data, *k), str)]
    if missing:
        return Skipped(source, "missing fields: " + ", ".join(missing))
    for i, r in enumerate(data["results"]):
        bad = validate_result(r) if isinstance(r, dict) else ["not an object"]
        if bad:
            return Skipped(source, f"results[{i}]: {bad[0]}")
    unique, repeated = dedupe_results([(f"{source}: results[{i}]", r)
                                       for i, r in enumerate(data["results"])])
    entry = _entry({**data, "results": unique})
    problems = _problems("history", entry)
    if problems:  # e.g. a started_at that is not a date
        return Skipped(source, "cannot be a history entry: " + problems)
    return Entry(entry, source, tuple(repeated))


def _entry(s: dict[str, Any]) -> dict[str, Any]:
    results: list[dict[str, Any]] = s["results"]
    arms = {a: _arm([r for r in results if r["arm"] == a]) for a in ARMS}
    t = [r for r in results if r["arm"] == "treatment"] or results
    exp = s["experiment"]
    return {
        "schemaVersion": 1, "kind": ENTRY_KIND,
        "run": {"id": s["run"]["id"], "started_at": s["run"]["started_at"],
                "name": s["run"].get("name"), "machine": s["run"].get("machine")},
        "experiment": {"name": exp["name"], "spec_hash": exp.get("spec_hash")},
        "commit": _get(t[0], "inputs", "commit"),
        "verdict": s["verdict"],
        "arms": {a: v for a, v in arms.items() if v is not None},
    }


def _arm(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    st = aggregate.arm_stats(rows[0]["arm"], rows)
    size, start = st.metrics.get("size"), st.metrics.get("startup")
    return {
        "digests": sorted({d for d in st.digests if d}),
        "reproducible": st.reproducible,
        "repeats": len(rows),
        "size_bytes": size.median if size else None,
        "startup_s": ({"median": start.median, "min": start.min, "max": start.max}
                      if start else None),
        "findings": _findings(rows),
        "inputs": recorded_inputs(rows),
    }


def _findings(rows: list[dict[str, Any]]) -> dict[str, int] | None:
    seen = [f for f in (_get(r, "metrics", "findings") for r in rows) if isinstance(f, dict)]
    if not seen:
        return None
    return {s: max(int(f.get(s, 0) or 0) for f in seen) for s in aggregate.SEVERITIES}


# ------------------------------------------------------------------------------ the trend


def read_history(paths: list[Path], experiment: str | None = None) -> History:
    """The trend of *experiment* (default: the one with the most runs) over every run
    the paths hold. InputError (exit 2) when a path does not exist or no run can be read."""
    files = [f for p in paths for f in _files(p)]
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    for f in files:
        got, bad = _read(f)
        entries += got
        skipped += bad
    unique, duplicates = _dedupe(entries)
    duplicates += [Skipped(where, why) for e in unique for where, why in e.repeated]
    if not unique:
        raise InputError(_nothing(files, skipped),
                         hint="give run directories (servelab run --out), their summary.json, "
                         "or a history file written by servelab history --append-to")
    chosen = experiment or _most_runs(unique)
    mine = sorted((e for e in unique if e.experiment == chosen), key=_order)
    if not mine:
        names = ", ".join(sorted({e.experiment for e in unique}))
        raise InputError(f"no run of experiment {chosen!r}", hint=f"runs found of: {names}")
    rows = [Row(e, _changes(mine[i - 1], e) if i else []) for i, e in enumerate(mine)]
    others = sorted((e for e in unique if e.experiment != chosen),
                    key=lambda e: (e.experiment, _order(e)))
    return History(chosen, rows[::-1], others, duplicates, skipped, files)


def _most_runs(entries: list[Entry]) -> str:
    """The experiment with the most runs; of equals, the one that ran last."""
    count: dict[str, int] = {}
    for e in entries:
        count[e.experiment] = count.get(e.experiment, 0) + 1
    return max(entries, key=lambda e: (count[e.experiment], _order(e))).experiment


def _nothing(files: list[Path], skipped: list[Skipped]) -> str:
    if not files:
        return "no summary.json or history file found"
    why = "; ".join(f"{s.source}: {s.reason}" for s in skipped[:5])
    return f"none of the {len(files)} files holds a run that can be read ({why})"


def _order(e: Entry) -> tuple[str, str]:
    return (e.started_at, e.key[1])


def _dedupe(entries: list[Entry]) -> tuple[list[Entry], list[Skipped]]:
    first: dict[tuple[str, str], Entry] = {}
    dupes: list[Skipped] = []
    for e in entries:
        if e.key in first:
            dupes.append(Skipped(e.source, f"run {e.key[1]} again (first read from "
                                 f"{first[e.key].source}): counted once"))
        else:
            first[e.key] = e
    return list(first.values()), dupes


def _changes(before: Entry, after: Entry) -> list[Change]:
    """What changed of each arm from the run before: a new digest, or a break where one side
    has no digest (unknown is never the same as anything). An arm neither run has is not
    compared; nor is a run without a digest after another without one (nothing new is known,
    and the break was marked where it began)."""
    out = []
    for arm in ARMS:
        a, b = before.arm(arm), after.arm(arm)
        if a is None and b is None:
            continue
        da, db = (a or {}).get("digests") or [], (b or {}).get("digests") or []
        if not da and not db:
            continue
        ia, ib = (a or {}).get("inputs") or {}, (b or {}).get("inputs") or {}
        if not da or not db or set(db) - set(da):  # a break, or a digest not given before
            out.append(Change(arm, da, db, differing_inputs(ia, ib), unknown_inputs(ia, ib)))
    return out


# ------------------------------------------------------------------------------ writing


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths are one file (by st_dev and st_ino), so an output never replaces
    an input, whatever the spelling of its path or the links to it."""
    try:
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_append_target(path: Path, inputs: list[Path]) -> None:
    """A summary.json given as input is never the history file appended to."""
    for f in inputs:
        if not f.name.endswith(HISTORY_SUFFIX) and same_file(f, path):
            raise InputError("--append-to names an input summary.json: it would be replaced",
                             file=str(path), hint="give a history file, e.g. history.jsonl")


def new_lines(path: Path, old: str, history: History) -> list[str]:
    """The lines to append to the history file *path* that holds *old*: one per run it does
    not hold yet (this experiment's, oldest first, then the others'), each one JSON record
    on one line (:func:`servelab.escape.json_line`: ASCII, so U+2028 or a lone surrogate
    cannot split it)."""
    from servelab.escape import json_line

    held = {e.key for e in _history_lines(path, old)[0]} if old else set()
    new = [e for e in reversed(history.entries()[: len(history.rows)]) if e.key not in held]
    new += [e for e in history.others if e.key not in held]
    out, seen = [], set()
    for e in new:
        if e.key in seen:
            continue
        seen.add(e.key)
        try:
            out.append(json_line(e.data))
        except ValueError as err:  # NaN or infinity: the reader refuses them, so never here
            raise InputError(f"run {e.key[1]} holds a number JSON cannot carry ({err})",
                             file=e.source, hint="fix or drop that run") from err
    return out


def _check_is_history(path: Path, old: str) -> None:
    """InputError (nothing is appended) when the file *path* holding *old* is not a history
    servelab wrote: its first line that is not blank is no ``servelab-history-entry`` record
    (another tool's JSON Lines, a text file). Empty files are new histories; a history with
    a bad line further down (of another servelab version, cut short) is still one."""
    for n, raw in enumerate(old.split("\n"), 1):
        line = raw.removesuffix("\r").strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            what = "is not JSON"
        else:
            if isinstance(data, dict) and data.get("kind") == ENTRY_KIND:
                return
            what = (f"is a JSON record whose kind is not {ENTRY_KIND!r}"
                    if isinstance(data, dict) else "is JSON, but not a record")
        raise InputError(
            f"--append-to: not a servelab history file (its first line {what}); nothing was "
            "appended", file=str(path), line=n,
            hint="give --append-to a history file servelab wrote (e.g. history.jsonl), or a "
            "new path for a new one")


def append(path: Path, history: History) -> int:
    """Append the runs the history file *path* lacks to it (created when missing), under a
    lock on the file and in one write (:func:`servelab.textio.append_locked`): concurrent
    appends from parallel jobs all land. Returns how many runs were added."""
    from servelab import textio

    check_append_target(path, history.inputs)
    added: list[int] = []

    def more(old: str) -> str:
        _check_is_history(path, old)
        lines = new_lines(path, old, history)
        added.append(len(lines))
        return "".join(line + "\n" for line in lines)

    textio.append_locked(path, more, max_bytes=textio.JSON_BYTES, what="the history file")
    return added[0] if added else 0


# ------------------------------------------------------------------------------ charts


@dataclass(frozen=True)
class Series:
    """One metric of the treatment over time, oldest first; a run without a value is left
    out (never drawn as 0), and counted in *missing*."""

    key: str
    title: str
    unit: str
    points: list[tuple[str, float]]
    missing: int


MIB = 1024 * 1024
CHARTS: tuple[tuple[str, str, str, Callable[[dict[str, Any]], float | None]], ...] = (
    ("size", "Treatment: compressed size", "MiB",
     lambda a: a["size_bytes"] / MIB if a.get("size_bytes") is not None else None),
    ("startup", "Treatment: start to ready, median", "s",
     lambda a: (a.get("startup_s") or {}).get("median")),
    ("findings", "Treatment: vulnerability findings", "findings",
     lambda a: sum(a["findings"].values()) if a.get("findings") is not None else None),
)


def labels(rows: list[Row]) -> dict[tuple[str, str], str]:
    """A short, unique x-axis label per run: ``MM-DD`` of its start, with ``HH:MM`` when
    another run started the same day, numbered when two started in the same minute."""
    days: dict[str, int] = {}
    for r in rows:
        days[r.entry.started_at[:10]] = days.get(r.entry.started_at[:10], 0) + 1
    out: dict[tuple[str, str], str] = {}
    used: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: _order(r.entry)):
        s = r.entry.started_at
        base = s[5:10] if days[s[:10]] == 1 else f"{s[5:10]} {s[11:16]}"
        used[base] = used.get(base, 0) + 1
        out[r.entry.key] = base if used[base] == 1 else f"{base} #{used[base]}"
    return out


def series(history: History) -> list[Series]:
    """Size, start-up and findings of the treatment over time, one series each."""
    names = labels(history.rows)
    oldest_first = history.rows[::-1]
    out = []
    for key, title, unit, get in CHARTS:
        points: list[tuple[str, float]] = []
        for r in oldest_first:
            arm = r.entry.arm("treatment")
            value = get(arm) if arm is not None else None
            if value is not None:
                points.append((names[r.entry.key], float(value)))
        out.append(Series(key, title, unit, points, len(oldest_first) - len(points)))
    return out
