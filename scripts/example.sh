#!/usr/bin/env bash
# The main job on the bundled example: set up (venv, engine, registry, base image), then run
# the experiment in examples/experiment.yaml. Artifacts and the summary go to ./servelab-out
# (override with SERVELAB_OUT). Extra arguments go to `servelab run`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/bootstrap.sh
. scripts/bootstrap.sh
out="${SERVELAB_OUT:-servelab-out}"
servelab doctor
rc=0
servelab run examples/experiment.yaml --out "$out" "$@" || rc=$?
echo "[example] summary: $out/summary.md  artifacts: $out/<arm>/repeat-<n>/  (exit $rc)" >&2
# The example's control arm fails its checks on purpose; exit 1 (findings) is the expected
# outcome, anything above it is an error of the run.
[ "$rc" -le 1 ] || exit "$rc"
