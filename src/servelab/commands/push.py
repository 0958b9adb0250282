"""Push the image a run tested to a registry, byte for byte, and say where it is.

  servelab push RUN_DIR --to REGISTRY/REPOSITORY[:TAG] [--arm treatment] [--format text|json]
  servelab push RUN_DIR --dry-run                      # find and check it; push nothing

RUN_DIR is the --out directory of servelab run. The arm's repeats must all have built one
digest (a reproducible arm); its OCI archive (RUN_DIR/images/<hex>.oci.tar) is pushed as it is:
blobs unchanged, manifests byte for byte, the tag last. The registry's Docker-Content-Digest
must equal the tested digest, so REPOSITORY@<digest> names exactly what was tested, e.g. to
attest it (actions/attest-build-provenance with subject-digest).

Credentials: SERVELAB_REGISTRY_USER and SERVELAB_REGISTRY_PASSWORD, or the Docker client's
config (docker login). Plain http only for loopback registries and
SERVELAB_INSECURE_REGISTRIES.

Under GitHub Actions (GITHUB_ACTIONS=true) it also sets the step outputs image (name@digest),
image-name, image-digest and image-archive; a GITHUB_OUTPUT that cannot be written is a
warning, and the push keeps its exit code.

Only the run directory is read: summary.json and result.json through the safe reader and
their schemas, --arm one of the run's arm names (not a path), and the archive
RUN_DIR/images/<hex>.oci.tar (never a file outside RUN_DIR, also not through a link).

Exit codes: 0 pushed (or found, with --dry-run), 1 the arm is not reproducible, 2 bad input
(not a run directory, no image built, archive missing, a digest in --to), 3 the registry cannot
be reached, refuses the upload or stores other bytes.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_quiet

    add_quiet(parser)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the --out directory of servelab run")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", metavar="REPOSITORY[:TAG]",
                        help="where to push, e.g. ghcr.io/org/app:pr-12 (no digest)")
    target.add_argument("--dry-run", action="store_true",
                        help="find and check the tested image; push nothing")
    parser.add_argument("--arm", default="treatment",
                        help="the arm whose image to push (default: treatment)")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="what to print: text (default) or JSON")


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from servelab.image.push import push_tested, tested_image

    tested = tested_image(Path(args.run_dir), args.arm)
    pushed = None if args.dry_run else push_tested(tested, args.to)
    doc = {"tested": tested.to_dict(), "pushed": pushed.to_dict() if pushed else None}
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(f"tested: {tested.arm} {tested.digest} ({tested.repeats} repeat(s), "
                         f"verdict {tested.verdict})\narchive: {tested.archive}\n")
        if pushed:
            sys.stdout.write(f"pushed: {pushed.ref}\n"
                             f"  {pushed.blobs_uploaded} blob(s) uploaded "
                             f"({pushed.bytes_uploaded} bytes), {pushed.blobs_present} "
                             "already there"
                             + (f"; tag {pushed.tag} -> {pushed.top_digest}" if pushed.tag
                                else "") + "\n")
    _github(tested, pushed)
    return 0


def _github(tested: object, pushed: object) -> None:
    """Step outputs, only when running under GitHub Actions."""
    from servelab import github
    from servelab.image.push import PushResult, TestedImage

    if not github.in_github_actions() or not isinstance(tested, TestedImage):
        return
    outputs = {"image-digest": tested.digest, "image-archive": str(tested.archive)}
    if isinstance(pushed, PushResult):
        outputs.update({"image": pushed.ref, "image-name": pushed.repository})
    github.set_outputs(outputs)
