#!/bin/sh
set -e
if [ ! -f /models/model.gguf ]; then
    curl -fL -o /models/model.gguf https://example.org/releases/model-q4.gguf
fi
[ -d /models/tokenizer ] || huggingface-cli download acme/tokenizer --local-dir /models/tokenizer
python /app/warm.py
exec llama-server -m /models/model.gguf --port 8000
