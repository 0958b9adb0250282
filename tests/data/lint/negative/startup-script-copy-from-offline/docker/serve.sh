#!/bin/sh
set -e
exec python3 -m vllm.entrypoints.openai.api_server --model /models/mistral-7b-instruct --port 8080
