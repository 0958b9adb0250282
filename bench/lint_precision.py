"""How often is `servelab lint` right on realistic serving Dockerfiles, and what does it miss?

The corpus (tests/data/lint/corpus*/<name>/, a Dockerfile plus the build context it needs,
each modelled on a public serving repository's Dockerfile) carries its judgement in
comments above instructions:

    # truth: rule-id     a real problem; servelab must report it there
    # false: rule-id     servelab reports it there, and it is wrong
    # miss: rule-id      a real problem servelab does not report (counts against recall)

A finding with neither a truth nor a false comment is "unjudged" and counted as false.
Precision = found truths / all findings; recall = found truths / (truths + misses).
``corpus`` was written while the rules were improved; ``corpus-heldout`` was written after,
and measured without changing a rule for it; ``corpus-heldout2`` and ``corpus-heldout3``
(2026-12-01) are fresh sets of 25 written with the judgements decided before servelab was
run on them (each README gives its first-run figure and what changed after).

    python bench/lint_precision.py                     # every set, serving rules and all
    python bench/lint_precision.py --baseline-src DIR  # also an older servelab (its src/)
    python bench/lint_precision.py --check             # exit 1 under 95% serving precision
    python bench/lint_precision.py --quick             # 3 entries a set, no verdict (CI)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "lint"
SETS = [DATA / "corpus", DATA / "corpus-heldout", DATA / "corpus-heldout2",
        DATA / "corpus-heldout3", DATA / "corpus-heldout4"]
#: servelab's own serving rules (the ones hadolint and Trivy have no equivalent of)
SERVING = ("weights-baked", "startup-download", "no-health", "root-user", "devel-base",
           "context-leak", "secret-in-build")
TARGET = 0.95
_NOTE = re.compile(r"^#\s*(truth|false|miss):\s*([a-z0-9-]+)")

Key = tuple[str, str, int]  # (entry, rule, line)


@dataclass
class Entry:
    name: str
    dockerfile: Path
    truth: Counter[Key] = field(default_factory=Counter)
    false: Counter[Key] = field(default_factory=Counter)
    miss: Counter[Key] = field(default_factory=Counter)


def _dockerfile(folder: Path) -> Path:
    sys.path.insert(0, str(REPO / "src"))
    from servelab.lint import find_dockerfiles

    found = [p for p, _d in find_dockerfiles([folder]) if p.parent == folder]
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one Dockerfile, found {found}")
    return found[0]


def load(folder: Path) -> Entry:
    path = _dockerfile(folder)
    entry = Entry(folder.name, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, raw in enumerate(lines):
        m = _NOTE.match(raw.strip())
        if not m:
            continue
        target = next(j + 1 for j in range(i + 1, len(lines))
                      if lines[j].strip() and not lines[j].strip().startswith("#"))
        getattr(entry, m.group(1))[(entry.name, m.group(2), target)] += 1
    return entry


def _materialise(folder: Path, tmp: Path) -> Path:
    """The folder to lint: a copy with ``dot-git`` renamed ``.git`` where there is one."""
    if not (folder / "dot-git").exists():
        return folder
    dest = tmp / folder.name
    shutil.copytree(folder, dest)
    (dest / "dot-git").rename(dest / ".git")
    return dest


_RUN = """
import json, sys
from pathlib import Path
from servelab.lint import LintConfig, lint_paths
out = []
for path, ctx in json.loads(sys.argv[1]):
    r = lint_paths([Path(path)], config=LintConfig(), hadolint=False, context=Path(ctx))
    out += [[path, f.rule_id, f.line or 0] for f in r.findings if f.source == "servelab"]
print(json.dumps(out))
"""


def findings(entries: list[Entry], src: Path) -> Counter[Key]:
    """(entry, rule, line) of every servelab finding, linted by the servelab in *src*."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs, names = [], {}
        for e in entries:
            folder = _materialise(e.dockerfile.parent, Path(tmp))
            path = folder / e.dockerfile.name
            jobs.append([str(path), str(folder)])
            names[str(path)] = e.name
        env = {"PYTHONPATH": str(src)}
        done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(jobs)], cwd=tmp,
                              capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            raise SystemExit(f"linting the corpus failed:\n{done.stderr}")
        return Counter((names[p], rule, line) for p, rule, line in json.loads(done.stdout))


@dataclass
class Score:
    found: int = 0
    false: int = 0
    unjudged: int = 0
    missed: int = 0

    @property
    def reported(self) -> int:
        return self.found + self.false + self.unjudged

    @property
    def precision(self) -> float:
        return self.found / self.reported if self.reported else 1.0

    @property
    def recall(self) -> float:
        total = self.found + self.missed
        return self.found / total if total else 1.0


def score(entries: list[Entry], got: Counter[Key], rules: set[str] | None) -> Score:
    truth: Counter[Key] = Counter()
    false: Counter[Key] = Counter()
    miss: Counter[Key] = Counter()
    for e in entries:
        truth.update(e.truth)
        false.update(e.false)
        miss.update(e.miss)

    def keep(c: Counter[Key]) -> Counter[Key]:
        return Counter({k: n for k, n in c.items() if rules is None or k[1] in rules})

    truth, false, miss, got = keep(truth), keep(false), keep(miss), keep(got)
    found = got & truth
    wrong = (got - truth) & false
    return Score(found=sum(found.values()), false=sum(wrong.values()),
                 unjudged=sum((got - truth - false).values()),
                 missed=sum((truth - got).values()) + sum(miss.values()))


def unjudged(entries: list[Entry], got: Counter[Key]) -> list[Key]:
    judged: Counter[Key] = Counter()
    for e in entries:
        judged.update(e.truth)
        judged.update(e.false)
    return sorted((got - judged).elements())


def _line(label: str, s: Score) -> str:
    return (f"  {label:<32} {s.found:4d} right  {s.false + s.unjudged:3d} wrong  "
            f"{s.missed:3d} missed   precision {s.precision:6.1%}  recall {s.recall:6.1%}")


def report(name: str, entries: list[Entry], got: Counter[Key]) -> Score:
    print(f"{name}: {len(entries)} Dockerfiles")
    serving = score(entries, got, set(SERVING))
    print(_line("serving rules", serving))
    print(_line("all servelab rules", score(entries, got, None)))
    for rule in sorted({k[1] for e in entries for k in (*e.truth, *e.false, *e.miss)}
                       | {k[1] for k in got}):
        print(_line(f"  {rule}", score(entries, got, {rule})))
    for key in unjudged(entries, got):
        print(f"  unjudged finding: {key}")
    return serving


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline-src", type=Path, metavar="DIR",
                    help="an older servelab's src/ directory to score the same way")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when serving precision is under "
                    + f"{TARGET:.0%}".replace("%", "%%") + " on a set")
    ap.add_argument("--quick", action="store_true",
                    help="3 entries of each set, no verdict: checks the script, not figures")
    args = ap.parse_args()
    ok = True
    for folder in SETS:
        if not folder.is_dir():
            continue
        entries = [load(d) for d in sorted(folder.iterdir()) if d.is_dir()]
        entries = entries[:3] if args.quick else entries
        serving = report(folder.name, entries, findings(entries, REPO / "src"))
        ok = ok and serving.precision >= TARGET
        if args.baseline_src:
            report(f"{folder.name} (baseline {args.baseline_src})", entries,
                   findings(entries, args.baseline_src))
        print()
    return 0 if ok or not args.check or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
