#!/bin/sh
set -e
pip install --no-cache-dir "vllm[audio]==0.6.4"
exec python3 -m vllm.entrypoints.openai.api_server --model mistralai/Mistral-7B-Instruct-v0.3 --port 8080
