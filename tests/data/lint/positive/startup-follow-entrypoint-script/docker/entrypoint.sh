#!/usr/bin/env bash
set -euo pipefail
cd /workspace/api
exec python -m textgen_api --port "${PORT:-8000}"
