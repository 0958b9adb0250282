"""Start an image hardened and time it to ready and to a first good request (the smoke test).

  servelab smoke IMAGE [EXPERIMENT] [options]

IMAGE must be in the engine's image store. Settings come from EXPERIMENT's serve, model,
request and gpu sections when given; every option below overrides them.

By default the container runs as the image's user (uid 0 fails), with a read-only root
filesystem (a tmpfs only for each --writable path), no network (which proves it downloads
nothing to become ready), --shm-size, the model mounted read-only with its sha256 recorded,
--cap-drop ALL and no-new-privileges. One prober inside the container's network namespace
records: created, started, first TCP accept, first health 2xx, first good representative
request (sent --request-count times after ready, p50/p95 latency). A failure comes with the
exit code, OOMKilled, the last log lines and the likely cause (write to the read-only root
filesystem, download attempt, permission denied, model missing or sha256 mismatch...). Files
that look like model weights baked into the image's layers are reported with their layer.

Every container is labelled servelab.run-id=<id> and removed at the end, on failure, timeout,
Ctrl-C and SIGTERM; leftovers of killed runs are swept at the next start.

Output: the report (text, or JSON with --format json) on stdout; with --out DIR, per start
DIR/start-<n>/smoke.json, container.log and probe-events.jsonl. DIR is claimed for the
command (a lock file in it): a second servelab writing there, or a start-<n> already there, is
exit 2 before anything starts; servelab never overwrites a user's file.

Exit codes: 0 every start passed, 1 a start failed (its verdict says why), 2 bad input or
usage (no such image, model path missing), 3 a GPU is required but unavailable, or no engine.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from servelab.commands._common import (
    add_allow_path,
    ascii_int,
    finite_float,
    input_path,
    output_path,
)

if TYPE_CHECKING:
    from servelab.smoke.stage import SmokeSettings


def _add_serve(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("serving (override the experiment's serve section)")
    g.add_argument("--port", type=ascii_int, help="port the server listens on (default 8000)")
    g.add_argument("--health-path", help="readiness path answering 2xx (default /health)")
    g.add_argument("--timeout", type=finite_float, metavar="SECONDS",
                   help="readiness timeout from container start (default 120)")
    g.add_argument("--writable", action="append", metavar="PATH",
                   help="a path that gets a tmpfs (repeatable); the rest is read-only")
    g.add_argument("--shm-size", help="shared memory size, e.g. 1g (default 64m)")
    g.add_argument("--network", choices=["none", "bridge"],
                   help="none (default: proves no download is needed) or bridge")
    g.add_argument("--user", help="run as this user instead of the image's USER")
    g.add_argument("--env", action="append", metavar="KEY=VALUE",
                   help="environment variable for the container (repeatable)")
    g.add_argument("--arg", action="append", metavar="ARG", dest="args",
                   help="argument appended to the image's command (repeatable)")


def _add_model(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (override the experiment's model section)")
    g.add_argument("--model", type=input_path, metavar="PATH",
                   help="model directory or file to mount read-only")
    g.add_argument("--model-volume", metavar="NAME", help="a named volume holding the model")
    g.add_argument("--model-sha256", metavar="HEX",
                   help="expected sha256 (file bytes, or a directory's sorted manifest)")
    g.add_argument("--mount-path", help="where the model is mounted (default /models)")


def _add_request(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("representative request (override the experiment's request)")
    g.add_argument("--request-path", help="path of the request, e.g. /predict")
    g.add_argument("--request-method", type=str.upper,
                   choices=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                   help="HTTP method (default POST)")
    g.add_argument("--request-header", action="append", metavar="NAME:VALUE",
                   help="request header (repeatable)")
    body = g.add_mutually_exclusive_group()
    body.add_argument("--request-body", metavar="TEXT", help="request body")
    body.add_argument("--request-body-file", type=input_path, metavar="FILE",
                      help="read the body from FILE")
    g.add_argument("--request-count", type=ascii_int, metavar="N",
                   help="times to send it after ready (default 5)")
    g.add_argument("--expect-status", type=ascii_int, metavar="CODE", help="default 200")
    g.add_argument("--expect-json", metavar="JSON", help="a JSON subset the body must contain")
    g.add_argument("--expect-regex", metavar="REGEX", help="a regex the body must match")


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_quiet

    add_quiet(parser)
    parser.add_argument("image", metavar="IMAGE", help="image reference or ID (local)")
    parser.add_argument("experiment", type=input_path, metavar="EXPERIMENT", nargs="?",
                        help="experiment file to take the settings from")
    parser.add_argument("--document", metavar="NAME",
                        help="the experiment document's name in a multi-document file")
    add_allow_path(parser)
    _add_serve(parser)
    _add_model(parser)
    _add_request(parser)
    g = parser.add_argument_group("run")
    g.add_argument("--gpu", action="store_true",
                   help="require GPUs: check the image's CUDA needs, start with all GPUs")
    g.add_argument("--starts", type=ascii_int, default=1, metavar="N",
                   help="start it N times; the first is reported apart (default 1)")
    g.add_argument("--probe", choices=["auto", "netns", "helper"], default="auto",
                   help="netns: host prober in the container's namespace (root); helper: a "
                   "helper container; auto: netns when root (default)")
    g.add_argument("--no-weights-scan", action="store_true",
                   help="do not read the image's layers for baked weights")
    g.add_argument("--keep", action="store_true",
                   help="leave the container in place (labelled servelab.keep=true)")
    g.add_argument("--run-id", help="the run id used in labels (default: generated)")
    g.add_argument("--out", metavar="DIR", help="write result files under DIR")
    g.add_argument("--format", "-f", choices=["text", "json"], default="text",
                   help="report format (default text)")
    g.add_argument("-o", "--output", type=output_path, metavar="FILE",
                   help="write the report to FILE")


#: what smoke --out writes at its top: a directory already holding one of these is refused
OUT_NAMES = ("start-*",)


def run(args: argparse.Namespace) -> int:
    import contextlib
    import tempfile
    from pathlib import Path

    from servelab import cleanup
    from servelab.commands._common import emit
    from servelab.errors import UsageError, combine
    from servelab.smoke.render import render_starts
    from servelab.smoke.stage import smoke_image
    from servelab.textio import claim_dir

    if args.starts < 1:
        raise UsageError("--starts must be at least 1")
    settings = _build_settings(args)
    run_id = args.run_id or cleanup.new_run_id()
    results = []
    with contextlib.ExitStack() as stack:
        # --out is claimed before the engine is asked anything: a second servelab on it, or
        # a user's start-<n>, is exit 2 at once (textio.claim_dir)
        claimed = (stack.enter_context(claim_dir(Path(args.out), names=OUT_NAMES))
                   if args.out else None)
        client = cleanup.docker_client()
        swept = cleanup.sweep(client=client)
        with cleanup.Cleanup(run_id, keep=False, client=client) as cu:
            out = claimed or Path(tempfile.mkdtemp(prefix="servelab-smoke-"))
            if claimed is None:
                cu.path(out)
            for n in range(args.starts):
                d = out / f"start-{n + 1}" if args.starts > 1 or args.out else out
                results.append(smoke_image(args.image, settings, run_id=run_id, out_dir=d,
                                           first_start=n == 0, client=client))
    code = combine(r.exit_code for r in results)
    if not args.out:
        for r in results:
            r.files.clear()  # the temporary directory is gone
    emit(render_starts(results, args.format, image=args.image, run_id=run_id, exit_code=code,
                       swept=swept.removed), args.output, args.format)
    return code


# ---------------------------------------------------------------------------- settings


def _build_settings(args: argparse.Namespace) -> SmokeSettings:
    from dataclasses import replace
    from pathlib import Path

    from servelab.smoke.stage import SmokeSettings
    from servelab.spec import load_experiment

    if args.experiment:
        exp = load_experiment(Path(args.experiment), args.document, tuple(args.allow_path))
        s = SmokeSettings.from_experiment(exp)
    else:
        s = SmokeSettings()
    s = replace(s, serve=_serve(args, s), model=_model(args, s), request=_request(args, s),
                probe=args.probe, scan_weights=not args.no_weights_scan, keep=args.keep)
    if args.gpu:
        s = replace(s, gpu=replace(s.gpu, required=True))
    _check_like_the_spec(s)
    return s


_SERVE_OPTIONS = {"port": "--port", "healthPath": "--health-path",
                  "readinessTimeoutSeconds": "--timeout", "writablePaths": "--writable",
                  "shmSize": "--shm-size", "network": "--network", "user": "--user",
                  "env": "--env", "args": "--arg"}
_REQUEST_OPTIONS = {"path": "--request-path", "method": "--request-method",
                    "headers": "--request-header", "count": "--request-count",
                    "status": "--expect-status", "regex": "--expect-regex"}
_MODEL_OPTIONS = {"mountPath": "--mount-path", "sha256": "--model-sha256", "": "--model"}


def _present(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _check_like_the_spec(s: SmokeSettings) -> None:
    """The options that mirror spec fields go through the spec's own schema: ``--port 0``,
    ``--health-path health``, a header with a line break or ``--expect-regex '('`` are exit
    2 at once, as in an experiment, never a timeout later."""
    from servelab.spec import check_options

    sv = s.serve
    check_options("serve", _present(
        port=sv.port, healthPath=sv.health_path, readinessTimeoutSeconds=sv.readiness_timeout_s,
        writablePaths=list(sv.writable_paths), shmSize=sv.shm_size, network=sv.network,
        user=sv.user, env=dict(sv.env), args=list(sv.args)), _SERVE_OPTIONS)
    if s.model is not None:
        check_options("model", _present(mountPath=s.model.mount_path, sha256=s.model.sha256),
                      _MODEL_OPTIONS)
    r = s.request
    if r is not None:
        expect = _present(status=r.expect_status, regex=r.expect_regex)
        check_options("request", _present(path=r.path, method=r.method,
                                          headers=dict(r.headers), count=r.count,
                                          expect=expect), _REQUEST_OPTIONS)


def _pairs(items: list[str] | None, sep: str, what: str) -> dict[str, str]:
    from servelab.errors import UsageError

    out: dict[str, str] = {}
    for item in items or []:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise UsageError(f"{what} {item!r} is not NAME{sep}VALUE")
        out[key.strip()] = value.strip() if sep == ":" else value
    return out


def _serve(args: argparse.Namespace, s: SmokeSettings) -> Any:
    from dataclasses import replace

    from servelab.errors import UsageError

    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be more than 0 seconds")
    changes = {
        "port": args.port, "health_path": args.health_path,
        "readiness_timeout_s": args.timeout, "shm_size": args.shm_size,
        "network": args.network, "user": args.user,
        "writable_paths": args.writable, "args": args.args,
    }
    serve = replace(s.serve, **{k: v for k, v in changes.items() if v is not None})
    if args.env:
        serve = replace(serve, env={**serve.env, **_pairs(args.env, "=", "--env")})
    for p in serve.writable_paths:
        if not p.startswith("/"):
            raise UsageError(f"--writable {p!r} must be an absolute path")
    return serve


def _sha(text: str | None) -> str | None:
    import re

    from servelab.errors import UsageError

    if text is None:
        return None
    value = text.strip().lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise UsageError(f"--model-sha256 {text!r} is not 64 hex digits")
    return value


def _model(args: argparse.Namespace, s: SmokeSettings) -> Any:
    from dataclasses import replace
    from pathlib import Path

    from servelab.errors import UsageError
    from servelab.spec import Model

    if args.model and args.model_volume:
        raise UsageError("give --model or --model-volume, not both")
    sha = _sha(args.model_sha256)
    if args.model or args.model_volume:
        base = s.model.mount_path if s.model else "/models"
        return Model(path=Path(args.model) if args.model else None, volume=args.model_volume,
                     mount_path=args.mount_path or base, sha256=sha)
    if s.model is None:
        if sha or args.mount_path:
            raise UsageError("--model-sha256 and --mount-path need --model or --model-volume")
        return None
    changes = {"sha256": sha, "mount_path": args.mount_path}
    return replace(s.model, **{k: v for k, v in changes.items() if v is not None})


def _request(args: argparse.Namespace, s: SmokeSettings) -> Any:
    import json
    from dataclasses import replace
    from pathlib import Path

    from servelab.errors import UsageError
    from servelab.spec import Request

    given = [a for a in ("request_method", "request_header", "request_body",
                         "request_body_file", "request_count", "expect_status",
                         "expect_json", "expect_regex") if getattr(args, a) is not None]
    req = s.request
    if args.request_path:
        req = replace(req, path=args.request_path) if req else Request(path=args.request_path)
    if req is None:
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} needs --request-path")
        return None
    headers = {**req.headers, **_pairs(args.request_header, ":", "--request-header")}
    body = req.body
    if args.request_body is not None:
        body = args.request_body.encode()
    elif args.request_body_file:
        from servelab.textio import BLOB_BYTES, read_bytes

        body = read_bytes(Path(args.request_body_file), max_bytes=BLOB_BYTES,
                          what="request body file")
    if body is not None and not any(k.lower() == "content-type" for k in headers):
        try:
            json.loads(body)
            headers["Content-Type"] = "application/json"
        except ValueError:
            pass
    expect_json = req.expect_json
    if args.expect_json is not None:
        try:
            expect_json = json.loads(args.expect_json)
        except ValueError as e:
            raise UsageError(f"--expect-json is not JSON: {e}") from e
    if args.request_count is not None and not 1 <= args.request_count <= 1000:
        raise UsageError("--request-count must be between 1 and 1000")
    changes = {"method": args.request_method, "count": args.request_count,
               "expect_status": args.expect_status, "expect_regex": args.expect_regex}
    return replace(req, headers=headers, body=body, expect_json=expect_json,
                   **{k: v for k, v in changes.items() if v is not None})
