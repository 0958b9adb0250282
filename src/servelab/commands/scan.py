"""Scan images for vulnerabilities (OS and language packages) and secrets with Trivy.

TARGET is an image in the local engine (NAME[:TAG][@sha256:...]), an OCI layout directory, an
OCI archive (a tar from 'docker buildx build --output type=oci,dest=FILE.tar', unpacked to a
temporary directory first) or a docker archive ('docker save'). Several targets may be given:
targets with the same digest (repeats of a reproducible build) are scanned once and the result
is shared, which the report says.

The policy comes from flags, or from an experiment's scan block with --spec (flags win):
severities that fail the gate, --ignore-unfixed, a .trivyignore or .trivyignore.yaml file and
a VEX document. --baseline compares with a stored result (the --json output of an earlier
scan, a run's result.json, or Trivy's own JSON) or with another image: new, fixed and
unchanged findings are listed.

Outputs: the report on stdout (text, json or markdown, for a job summary), and on request
--json (the parsed result), --sarif (SARIF 2.1.0 holding only the severities the policy
fails on) and --sbom (CycloneDX JSON). With targets of several digests, --sarif and --sbom get
the digest's first 12 hex digits before the extension.

The vulnerability DB lives in --cache-dir (keep it between CI runs with actions/cache). Online,
it is downloaded when due from --db-repository mirrors, tried in order. --offline never
downloads. The scan fails closed: a missing, corrupt or stale DB (--max-db-age), a failing or
timed-out Trivy (--timeout) or output that does not parse is exit 3, never zero findings.

A multi-platform OCI image is scanned for one platform (Trivy reads one manifest): --platform,
by default this machine's when the image has it, else the image's first. The digest reported
is that platform's manifest digest; the report names the platforms not scanned.

Exit codes: 0 the gate passed, 1 a finding at a failing severity (listed), 2 bad input or
usage, 3 Trivy or its DB unusable.
"""

from __future__ import annotations

import argparse
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import (
        add_allow_path,
        add_fail_on,
        add_quiet,
        finite_float,
        input_path,
        output_path,
    )

    add_quiet(parser)

    parser.add_argument("targets", nargs="+", metavar="TARGET", type=input_path,
                        help="image name, OCI layout directory, OCI or docker archive")
    parser.add_argument("--platform", metavar="OS/ARCH[/VARIANT]",
                        help="the platform of a multi-platform image to scan (default: this "
                        "machine's when the image has it, else the image's first)")
    pol = parser.add_argument_group("policy (default: the --spec scan block, else built-ins)")
    pol.add_argument("--spec", metavar="FILE", type=input_path,
                     help="take the policy from this experiment file")
    pol.add_argument("--document", metavar="NAME", help="experiment document in --spec")
    add_allow_path(pol)
    add_fail_on(pol, default=None, what="the severities that fail the gate",
                shown_default="CRITICAL,HIGH, or the --spec's failOn")
    pol.add_argument("--ignore-unfixed", action="store_true", default=None,
                     help="ignore vulnerabilities that have no fixed version")
    pol.add_argument("--ignore-file", metavar="FILE", type=input_path,
                     help="a .trivyignore or .trivyignore.yaml file")
    pol.add_argument("--vex", metavar="FILE", type=input_path,
                     help="a VEX document (OpenVEX, CycloneDX, CSAF)")
    pol.add_argument("--baseline", metavar="RESULT|TARGET", type=input_path,
                     help="compare with a stored result file or with another image")
    db = parser.add_argument_group("Trivy and its DB")
    db.add_argument("--cache-dir", metavar="DIR", help="Trivy cache directory (DB inside)")
    db.add_argument("--db-repository", action="append", metavar="REPO", default=None,
                    help="DB mirror (repeatable, tried in order)")
    db.add_argument("--offline", action="store_true", default=None,
                    help="never download the DB; no network requests")
    db.add_argument("--max-db-age", type=finite_float, metavar="HOURS",
                    help="fail (exit 3) when the DB is older (default: 168)")
    db.add_argument("--timeout", type=finite_float, metavar="SECONDS",
                    help="timeout of each Trivy call (default: 1800)")
    out = parser.add_argument_group("outputs")
    out.add_argument("--sarif", metavar="FILE", type=output_path, help="write SARIF 2.1.0 here")
    out.add_argument("--sbom", metavar="FILE", type=output_path,
                     help="write the CycloneDX SBOM here")
    out.add_argument("--json", metavar="FILE", type=output_path,
                     help="write the parsed result as JSON here")
    out.add_argument("--out-dir", metavar="DIR",
                     help="keep every file of every scan here (default: a temp dir, removed)")
    out.add_argument("-f", "--format", default="text", choices=["text", "json", "markdown"],
                     help="report format on stdout (default: text)")
    out.add_argument("-o", "--output", metavar="FILE", type=output_path,
                     help="write the report here instead")


def _policy(args: argparse.Namespace) -> Any:
    from dataclasses import replace
    from pathlib import Path

    from servelab.findings import parse_fail_on
    from servelab.spec import ScanPolicy, load_experiment

    policy = ScanPolicy()
    if args.spec:
        policy = load_experiment(Path(args.spec), args.document, tuple(args.allow_path)).scan
    changes: dict[str, Any] = {}
    if args.fail_on is not None:
        changes["fail_on"] = list(parse_fail_on(args.fail_on).trivy)
    for flag, key in (("ignore_unfixed", "ignore_unfixed"), ("offline", "offline"),
                      ("max_db_age", "max_db_age_hours"), ("db_repository", "db_repositories")):
        if getattr(args, flag) is not None:
            changes[key] = getattr(args, flag)
    for flag, key in (("ignore_file", "ignore_file"), ("vex", "vex"),
                      ("cache_dir", "cache_dir")):
        if getattr(args, flag):
            changes[key] = Path(getattr(args, flag))
    if args.timeout is not None:
        changes["timeout_s"] = int(args.timeout)
    return replace(policy, **changes)


def _suffixed(path: str, digest: str, several: bool) -> str:
    from pathlib import Path

    if not several:
        return path
    p = Path(path)
    short = digest.rsplit(":", maxsplit=1)[-1][:12]
    stem = p.name[: -len("".join(p.suffixes))] if p.suffixes else p.name
    return str(p.with_name(f"{stem}-{short}{''.join(p.suffixes)}"))


def _copy_outputs(args: argparse.Namespace, results: list[Any]) -> None:
    from pathlib import Path

    from servelab.textio import copy_file

    digests = {r.digest for r in results}
    done: set[str] = set()
    for r in results:
        if r.digest in done:
            continue
        done.add(r.digest)
        for flag, key in (("sarif", "sarif"), ("sbom", "sbom")):
            if getattr(args, flag):
                copy_file(Path(_suffixed(getattr(args, flag), r.digest, len(digests) > 1)),
                          Path(r.files[key]), what=f"the {flag.upper()} output (--{flag})")


def _baseline(args: argparse.Namespace, scanner: Any, work: Any) -> Any:
    from pathlib import Path

    from servelab.scan import stage as scan

    if not args.baseline:
        return None
    p = Path(args.baseline)
    if p.suffix == ".json":  # a stored result: the safe reader says what is wrong with it
        return scan.load_result(p, scanner.policy)
    return scanner.scan(args.baseline, out_dir=work / "baseline", platform=args.platform)


def run(args: argparse.Namespace) -> int:
    import contextlib
    import shutil
    import tempfile
    from pathlib import Path

    from servelab.commands._common import emit
    from servelab.errors import ExitCode
    from servelab.scan import stage as scan
    from servelab.scan.render import render_report
    from servelab.textio import claim_dir, write_file

    scanner = scan.Scanner(_policy(args))
    keep = Path(args.out_dir) if args.out_dir else None
    with contextlib.ExitStack() as stack:
        if keep is not None:  # claimed: one scan at a time, nothing of an earlier one replaced
            names = ("baseline", *(str(i + 1) for i in range(len(args.targets))))
            work = stack.enter_context(claim_dir(keep, names=names, option="--out-dir"))
        else:
            work = Path(tempfile.mkdtemp(prefix="servelab-scan-"))
            stack.callback(shutil.rmtree, work, ignore_errors=True)
        base = _baseline(args, scanner, work)
        results = [scanner.scan(t, out_dir=work / f"{i + 1}", platform=args.platform)
                   for i, t in enumerate(args.targets)]
        diffs = [scan.compare(base, r) if base is not None else None for r in results]
        _copy_outputs(args, results)
        if args.json:
            write_file(Path(args.json), render_report(results, diffs, "json"),
                       what="the JSON output (--json)")
    emit(render_report(results, diffs, args.format), args.output, args.format)
    failed = any(r.gate is not None and not r.gate.passed for r in results)
    return int(ExitCode.FINDINGS if failed else ExitCode.OK)
