#!/bin/bash
set -euo pipefail
python -m model_server.downloader --model-uri "hf://Qwen/Qwen2.5-0.5B-Instruct" --dest /tmp/model
text-generation-server download-weights Qwen/Qwen2.5-0.5B-Instruct
exec python -m model_server --model-dir /tmp/model --port 8080
