"""Score servelab on its own real-world corpus (files.tsv, truths frozen in truths.tsv).

Runs `servelab lint` on each cached Dockerfile (without its build context: a start script or
a COPY source is not there, so what depends on them cannot be seen) and `servelab k8s-check`
on each cached manifest alone, then matches findings to truths and prints recall and
precision per rule, for servelab's serving rules and for all rules, per tool.

    python eval/realworld/fetch.py ...          # fill the cache first (see README.md)
    python eval/realworld/score.py               # both tools, the servelab of this checkout
    python eval/realworld/score.py --src DIR     # another servelab's src/ (a baseline)
    python eval/realworld/score.py --json FILE   # also write every finding
    python eval/realworld/score.py --findings FILE   # rescore a run saved with --json and match

Definitions (the same as bench/lint_precision.py): a truth is found when a finding of its
rule on its file has a line the truth allows ("12", a range "12-30" for a field that is
missing from a block, or alternatives "15,18"); each finding matches at most one truth.
recall = found truths / truths; precision = found truths / all findings, where a finding
that matches no truth is false. An info finding that only says what servelab could not read
(a start script or requirements file of the build context, which is not fetched) is a
coverage note: listed apart, counted neither way. Two views are printed:

* frozen: truths.tsv exactly as written before servelab ran;
* judged: also judged.tsv (written after a run, one line per finding that matched no truth:
  `false-positive confirmed` stays false, `new truth found late` counts as a truth) and
  corrections.tsv (a truth found wrong later, dropped with its reason, or one added).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from fetch import DEFAULT_CACHE, Entry, cached_path, load_files  # noqa: E402

#: servelab's own serving rules, as bench/lint_precision.py and docs/k8s-check.md name them
SERVING = {
    "lint": {"weights-baked", "startup-download", "no-health", "root-user", "devel-base",
             "context-leak", "secret-in-build"},
    "k8s-check": {"gpu-limit", "gpu-toleration", "gpu-placement", "driver-compat", "shm",
                  "startup-probe-budget", "probe-target", "model-mount", "start-install"},
}
TOOL = {"dockerfile": "lint", "manifest": "k8s-check"}
LATE = "new truth found late"
CONFIRMED = "false-positive confirmed"


@dataclass(frozen=True)
class Truth:
    id: str
    rule: str
    lines: frozenset[int]
    spec: str
    note: str


@dataclass(frozen=True)
class Finding:
    id: str
    rule: str
    line: int
    message: str
    severity: str = "warning"


#: an info finding that says what servelab could not read (a file of the missing build
#: context, an application not followed) is a coverage note, not a judgement of the file
_COVERAGE = re.compile(r"not (?:fully )?(?:judged|followed|read)|which lacks it")


def is_coverage_note(f: Finding) -> bool:
    return f.severity == "info" and bool(_COVERAGE.search(f.message))


@dataclass
class RunResult:
    findings: list[Finding] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)
    coverage: list[Finding] = field(default_factory=list)


def parse_lines(spec: str) -> frozenset[int]:
    """'12' -> {12}; '12-14' -> {12, 13, 14}; '4,17' and '4,10-12' -> the union."""
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        first = int(lo)
        last = int(hi) if hi else first
        if last < first:
            raise ValueError(f"bad line range {spec!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as fh:
        return [r for r in csv.DictReader(fh, delimiter="\t")
                if r.get("id") and not r["id"].startswith("#")]


def load_truths(path: Path = HERE / "truths.tsv") -> list[Truth]:
    return [Truth(r["id"], r["rule"], parse_lines(r["line"]), r["line"], r.get("note") or "")
            for r in _rows(path)]


def judged_truths(truths: list[Truth]) -> list[Truth]:
    """The truths of the judged view: corrections.tsv applied, late truths of judged.tsv added."""
    out = list(truths)
    for r in _rows(HERE / "corrections.tsv"):
        spec = r["line"]
        if r["action"] == "drop":
            out = [t for t in out
                   if not (t.id == r["id"] and t.rule == r["rule"] and t.spec == spec)]
        elif r["action"] == "add":
            out.append(Truth(r["id"], r["rule"], parse_lines(spec), spec, r.get("reason", "")))
    for r in _rows(HERE / "judged.tsv"):
        if r["verdict"] == LATE:
            out.append(Truth(r["id"], r["rule"], parse_lines(r["line"]), r["line"],
                             r.get("note") or ""))
    return out


def _servelab(args: list[str], cwd: Path, src: Path) -> tuple[int, dict[str, object] | None, str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-m", "servelab", *args, "-f", "json"], cwd=cwd,
                          capture_output=True, text=True, check=False, env=env)
    try:
        data = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        data = None
    return done.returncode, data, done.stderr.strip() or done.stdout.strip()


def _collect(entry: Entry, data: dict[str, object] | None, rc: int, err: str,
             result: RunResult) -> None:
    if rc == 2 or data is None:
        result.unread[entry.id] = (err.splitlines() or [f"exit {rc}"])[-1][:200]
        return
    found = data.get("findings", [])
    for f in found if isinstance(found, list) else []:
        if isinstance(f, dict) and f.get("source", "servelab") == "servelab":
            finding = Finding(entry.id, f["rule"], int(f.get("line") or 0),
                              str(f.get("message", "")), str(f.get("severity", "")))
            (result.coverage if is_coverage_note(finding) else result.findings).append(finding)


def run(entries: list[Entry], cache: Path, src: Path) -> RunResult:
    result = RunResult()
    for entry in entries:
        path = cached_path(cache, entry)
        if not path.is_file():
            result.unread[entry.id] = "not in the cache (run fetch.py)"
            continue
        if entry.kind == "dockerfile":
            cmd = ["lint", str(path), "--no-hadolint"]
        else:
            cmd = ["k8s-check", str(path)]
        rc, data, err = _servelab(cmd, path.parent, src)
        _collect(entry, data, rc, err, result)
    return result


def load_run(path: Path) -> RunResult:
    data = json.loads(path.read_text(encoding="utf-8"))
    return RunResult(findings=[Finding(**f) for f in data["findings"]],
                     unread=dict(data["unread"]),
                     coverage=[Finding(**f) for f in data.get("coverage_notes", [])])


def match(truths: list[Truth], findings: list[Finding]) -> dict[int, int]:
    """Maximum matching finding index -> truth index (same id and rule, line allowed)."""
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
    for ti, t in enumerate(truths):
        by_key[(t.id, t.rule)].append(ti)
    owner: dict[int, int] = {}  # truth index -> finding index

    def augment(fi: int, seen: set[int]) -> bool:
        f = findings[fi]
        for ti in by_key.get((f.id, f.rule), []):
            if ti in seen or f.line not in truths[ti].lines:
                continue
            seen.add(ti)
            if ti not in owner or augment(owner[ti], seen):
                owner[ti] = fi
                return True
        return False

    for fi in range(len(findings)):
        augment(fi, set())
    return {fi: ti for ti, fi in owner.items()}


@dataclass
class Score:
    truths: int = 0
    findings: int = 0
    found: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.truths if self.truths else 1.0

    @property
    def precision(self) -> float:
        return self.found / self.findings if self.findings else 1.0


def score(truths: list[Truth], findings: list[Finding], matched: dict[int, int],
          rules: set[str] | None) -> Score:
    def keep(rule: str) -> bool:
        return rules is None or rule in rules
    found = sum(1 for fi in matched if keep(findings[fi].rule))
    return Score(truths=sum(1 for t in truths if keep(t.rule)),
                 findings=sum(1 for f in findings if keep(f.rule)), found=found)


def _line(label: str, s: Score) -> str:
    return (f"  {label:<24} truths {s.truths:4d}  findings {s.findings:4d}  found {s.found:4d}"
            f"   recall {s.recall:6.1%}  precision {s.precision:6.1%}")


def report_view(tool: str, view: str, truths: list[Truth], findings: list[Finding]) -> None:
    matched = match(truths, findings)
    print(f"{tool} ({view}):")
    print(_line("serving rules", score(truths, findings, matched, SERVING[tool])))
    print(_line("all rules", score(truths, findings, matched, None)))
    for rule in sorted({t.rule for t in truths} | {f.rule for f in findings}):
        print(_line(f"  {rule}", score(truths, findings, matched, {rule})))


def report_lists(truths: list[Truth], findings: list[Finding]) -> None:
    matched = match(truths, findings)
    found = set(matched.values())
    judged = {(r["id"], r["rule"], r["line"]): r["verdict"] for r in _rows(HERE / "judged.tsv")}
    for ti, t in enumerate(truths):
        if ti not in found:
            print(f"  miss   {t.rule:<22} {t.id} line {t.spec:<10} {t.note}")
    for fi, f in enumerate(findings):
        if fi not in matched:
            verdict = judged.get((f.id, f.rule, str(f.line)), "unjudged")
            print(f"  false  {f.rule:<22} {f.id} line {f.line:<10} [{verdict}] {f.message[:110]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--src", type=Path, default=REPO / "src", help="servelab's src/ to run")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every finding to FILE")
    ap.add_argument("--findings", type=Path, metavar="FILE",
                    help="score the findings a previous run wrote with --json (no servelab run)")
    ap.add_argument("--round", metavar="DATE",
                    help="score only the files added on DATE (files.tsv's date_added), "
                    "e.g. 2026-12-05 for the second round")
    ap.add_argument("--ids", metavar="PREFIXES",
                    help="score only the ids that start with one of these comma-separated "
                    "prefixes, e.g. d3,m3 for the third round")
    args = ap.parse_args(argv)
    prefixes = tuple(p for p in (args.ids or "").split(",") if p)
    entries = [e for e in load_files() if (not args.round or e.date_added == args.round)
               and (not prefixes or e.id.startswith(prefixes))]
    if not entries:
        print("score.py: no file of files.tsv matches --round/--ids", file=sys.stderr)
        return 2
    kinds = {e.id: e.kind for e in entries}
    frozen = [t for t in load_truths() if t.id in kinds]
    result = load_run(args.findings) if args.findings else run(entries, args.cache,
                                                                  args.src.resolve())
    counts = Counter(e.kind for e in entries)
    print(f"{counts['dockerfile']} Dockerfiles, {counts['manifest']} manifests from "
          f"{len({e.repo for e in entries})} repositories; {len(frozen)} frozen truths")
    for ident, why in sorted(result.unread.items()):
        print(f"  not read: {ident}: {why}")
    notes = Counter(f"{kinds.get(f.id)}/{f.rule}" for f in result.coverage)
    print(f"  coverage notes (what servelab says it could not read, e.g. the missing build "
          f"context), not counted as findings: {len(result.coverage)} "
          + ", ".join(f"{k} {n}" for k, n in sorted(notes.items())))
    for kind, tool in TOOL.items():
        t_frozen = [t for t in frozen if kinds.get(t.id) == kind]
        t_judged = [t for t in judged_truths(frozen) if kinds.get(t.id) == kind]
        fs = [f for f in result.findings if kinds.get(f.id) == kind]
        print()
        report_view(tool, "frozen truths", t_frozen, fs)
        if t_judged != t_frozen or (HERE / "judged.tsv").is_file():
            report_view(tool, "judged: late truths and corrections applied", t_judged, fs)
        print(f"{tool}: misses and findings that match no frozen truth")
        report_lists(t_frozen, fs)
    if args.json:
        args.json.write_text(json.dumps({
            "unread": result.unread,
            "findings": [f.__dict__ for f in result.findings],
            "coverage_notes": [f.__dict__ for f in result.coverage],
        }, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
