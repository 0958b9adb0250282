#!/bin/bash
# serve the mounted model, nothing else
set -euo pipefail
exec python3 -m vllm.entrypoints.openai.api_server --model "${MODEL_DIR}" --port 8000
