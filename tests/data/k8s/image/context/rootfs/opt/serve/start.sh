#!/bin/bash
set -euo pipefail
# extras this deployment needs, installed when the container starts
pip install --no-cache-dir flash-attn accelerate
./install_model.sh
exec python3 -m vllm.entrypoints.openai.api_server --model "${MODEL_DIR}" "$@"
