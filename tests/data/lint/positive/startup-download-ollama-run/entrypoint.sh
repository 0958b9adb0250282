#!/bin/sh
set -e
ollama serve &
server=$!
until ollama list >/dev/null 2>&1; do sleep 1; done
# warm the model so the first request does not wait for it
ollama run "${OLLAMA_MODEL:-qwen2.5:0.5b}" "" </dev/null
wait "$server"
