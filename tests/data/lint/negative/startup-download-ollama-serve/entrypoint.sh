#!/bin/sh
set -e
ollama serve &
server=$!
until ollama list >/dev/null 2>&1; do sleep 1; done
echo "models in ${OLLAMA_MODELS}:"
ollama list
ollama ps
wait "$server"
