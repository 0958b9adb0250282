"""A stand-in for ``servelab run`` that keeps to its documented interface.

Used only by the action's plumbing tests (argument passing, outputs, artifact plan) so that
they run in seconds without Docker; the real CLI runs in the other tests of test_act.py and in
test_examples_act.py. It records its argv (JSON) in ``$SERVELAB_STANDIN_RECORD`` and exits with
``$SERVELAB_STANDIN_EXIT``; with ``$SERVELAB_STANDIN_STOP`` set it stops before its summary, as
servelab run does on exit 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

#: a result.json its schema accepts (servelab reads its own documents back through it)
RESULT = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good" / "result.json"


def _write_tree(out: Path, repeats: int) -> None:
    arms = ["control", "treatment"]
    results = []
    for n in range(1, repeats + 1):
        for arm in arms:
            d = out / arm / f"repeat-{n}"
            d.mkdir(parents=True, exist_ok=True)
            results.append({**json.loads(RESULT.read_text()), "arm": arm, "repeat": n})
            (d / "result.json").write_text(json.dumps(results[-1]))
            (d / "container.log").write_text("::warning::from an untrusted container log\n")
    annotations = [
        {"level": "warning", "file": "Dockerfile", "line": i, "title": f"w{i}", "message": "m"}
        for i in range(1, 13)
    ] + [{"level": "error", "file": "Dockerfile", "line": 1, "title": "e", "message": "bad"}]
    summary = {
        "schemaVersion": 1,
        "verdict": "trade-off",
        "reproducible": True,
        "digest": "sha256:" + "ab" * 32,
        "size_bytes": 123456,
        "startup_p50_s": 1.5,
        "findings": {"CRITICAL": 1, "HIGH": 2, "MEDIUM": 3, "LOW": 4, "UNKNOWN": 0},
        "repeats": repeats,
        "arms": arms,
        "annotations": annotations,
        "results": results,
    }
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "summary.md").write_text("# servelab: trade-off\n\n| arm | digest |\n|---|---|\n")
    (out / "lint.sarif").write_text('{"version": "2.1.0", "runs": []}')


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:
        sys.stdout.write("servelab 0.0.0 (stand-in)\n")
        return 0
    record = os.environ.get("SERVELAB_STANDIN_RECORD")
    if record:
        Path(record).write_text(json.dumps({"argv": argv, "cwd": str(Path.cwd())}))
    p = argparse.ArgumentParser(prog="servelab")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("experiment")
    r.add_argument("--out", required=True)
    r.add_argument("--repeats", type=int, default=2)
    r.add_argument("--stages")
    r.add_argument("--fail-on")
    r.add_argument("--gpu", action="store_true")
    r.add_argument("--no-gpu", action="store_true")
    r.add_argument("--trivy-cache-dir")
    r.add_argument("--db-repository", action="append", default=[])
    r.add_argument("--offline", action="store_true")
    r.add_argument("--run-name")
    r.add_argument("--format", default="text")
    args = p.parse_args(argv)
    out = Path(args.out)
    if os.environ.get("SERVELAB_STANDIN_STOP"):  # stop as servelab run does on exit 3
        sys.stderr.write("servelab: [control 1/1] start\nservelab:   scan ...\n"
                         "servelab run: the Trivy DB could not be downloaded from any "
                         "repository:\n  mirror.example/a: TOOMANYREQUESTS\n"
                         "  fix: pass a reachable mirror with --db-repository (tried in order), "
                         "or restore a cached DB and use --offline\n")
        return 3
    _write_tree(out, args.repeats)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from servelab.github import publish_run

        publish_run(out)
    return int(os.environ.get("SERVELAB_STANDIN_EXIT", "0"))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
