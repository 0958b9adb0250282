#!/usr/bin/env bash
# The test command: set up everything the tests need (venv, Docker engine with buildx,
# local registry, the example's base image, Trivy, hadolint), then run ruff, mypy and pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/spec -x).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/bootstrap.sh
. scripts/bootstrap.sh
echo "[test] ruff" >&2
ruff check src tests bench scripts
echo "[test] mypy (strict on src/)" >&2
mypy
echo "[test] pytest" >&2
exec python -m pytest "$@"
