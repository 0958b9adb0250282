#!/usr/bin/env bash
# The main job on the bundled example: set up (venv, engine, registry, base image), then run
# the experiment in examples/experiment.yaml: control (the common way) vs treatment (pinned
# base, non-root, model mounted read-only), 3 repeats each, lint -> build -> scan -> smoke.
#
# Artifacts and the summary go to servelab-out/run-<time>/ (or $SERVELAB_OUT).
# Vulnerability DB: with SERVELAB_TRIVY_CACHE=<dir> the scan uses the Trivy DB cached there
# (downloaded by Trivy where the network allows). Without it, on machines that cannot reach
# Trivy's DB registry, the scan runs offline against servelab's *fixture* DB (made-up
# advisories CVE-2099-*, see tests/trivydb.py): the findings then show the mechanics, not
# real vulnerabilities; the summary's "Scanner" line names the DB it used.
# Start-up cost on a node: each tested image is pushed to a registry of the run's own
# (SERVELAB_COLDSTART_REGISTRY, default `private`: plain and TLS on loopback ports, its storage
# under TMPDIR, removed with its blobs at the end; a HOST:PORT uses that registry, empty skips)
# and pulled before every start, cold and with the base held, checked cold by that registry's
# storage and log, and pulled lazily (SOCI) over TLS. SERVELAB_EXAMPLE_MODEL_SIZE=4G runs the same
# experiment with a 4 GB model in a Docker volume (examples/experiment-big-model.yaml; the
# volume servelab-example-model is made by examples/make_model.py and left for the next run).
# Extra arguments go to `servelab run` (e.g. --repeats 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export SERVELAB_SETUP_FOR=example # only the tests need the Mermaid CLI
# shellcheck source=scripts/bootstrap.sh
. scripts/bootstrap.sh
out="${SERVELAB_OUT:-servelab-out/run-$(date -u +%Y%m%dT%H%M%SZ)}"
scan_args=()
if [ -n "${SERVELAB_TRIVY_CACHE:-}" ]; then
  scan_args=(--trivy-cache-dir "$SERVELAB_TRIVY_CACHE")
else
  cache="$STATE/trivy-fixture-cache"
  python - "$cache" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "tests")
import trivydb
trivydb.write_db(Path(sys.argv[1]), trivydb.FIXTURE_ADVISORIES)
PY
  echo "[example] scanning offline with servelab's fixture Trivy DB (made-up CVE-2099-* advisories);" \
       "set SERVELAB_TRIVY_CACHE to use a real one" >&2
  scan_args=(--offline --trivy-cache-dir "$cache")
fi
export SERVELAB_COLDSTART_REGISTRY="${SERVELAB_COLDSTART_REGISTRY-private}"
experiment=examples/experiment.yaml
if [ -n "${SERVELAB_EXAMPLE_MODEL_SIZE:-}" ]; then
  python examples/make_model.py --size "$SERVELAB_EXAMPLE_MODEL_SIZE" \
    --volume servelab-example-model
  experiment=examples/experiment-big-model.yaml
fi
# With the private registry the lazy pull (SOCI) is measured too. Where it cannot run (not
# root, no FUSE), the summary says "lazy not measured: <reason>". The set-up's registry
# (127.0.0.1:5000, TLS on 5443, one storage) is used with its storage and access log when
# SERVELAB_COLDSTART_REGISTRY names it.
node_args=()
if [ "$SERVELAB_COLDSTART_REGISTRY" = private ]; then
  node_args=(--lazy soci)
elif [ -n "$SERVELAB_COLDSTART_REGISTRY" ]; then
  export SERVELAB_REGISTRY_DATA="${SERVELAB_REGISTRY_DATA-$STATE/registry-data}"
  export SERVELAB_REGISTRY_LOG="${SERVELAB_REGISTRY_LOG-$STATE/registry.log}"
  if [ "$SERVELAB_COLDSTART_REGISTRY" = "$REGISTRY_ADDR" ] && tls_registry_answers; then
    export SERVELAB_LAZY_REGISTRY="${SERVELAB_LAZY_REGISTRY-$TLS_REGISTRY_ADDR}"
    export SERVELAB_REGISTRY_CA="${SERVELAB_REGISTRY_CA-$TLS_DIR/ca.pem}"
    export SERVELAB_LAZY_REGISTRY_LOG="${SERVELAB_LAZY_REGISTRY_LOG-$STATE/registry-tls.log}"
    node_args=(--lazy soci)
  fi
fi
servelab doctor
rc=0
servelab run "$experiment" --out "$out" "${scan_args[@]}" "${node_args[@]}" "$@" || rc=$?
echo "[example] summary: $out/summary.md" >&2
echo "[example] artifacts: $out/<arm>/repeat-<n>/ (result.json, build record, trivy.json," \
     "scan.sarif, sbom.cdx.json, container.log)" >&2
exit "$rc"
