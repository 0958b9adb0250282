#!/bin/sh
# Fetch one converted Whisper model (ggml format) from the Hugging Face mirror into this folder.
# usage: ./download-ggml-model.sh <model> [dir]

src="https://huggingface.co/ggerganov/whisper.cpp"
pfx="resolve/main/ggml"

model="$1"
models_dir="${2:-$(cd "$(dirname "$0")" && pwd)}"

if [ -z "$model" ]; then
    echo "usage: $0 <model> [dir]" >&2
    exit 1
fi

cd "$models_dir" || exit 1

if [ -f "ggml-$model.bin" ]; then
    echo "model $model already present, skipping"
    exit 0
fi

if command -v wget >/dev/null 2>&1; then
    wget --no-config --quiet --show-progress -O "ggml-$model.bin" "$src/$pfx-$model.bin"
elif command -v curl >/dev/null 2>&1; then
    curl -L --output "ggml-$model.bin" "$src/$pfx-$model.bin"
else
    echo "need wget or curl" >&2
    exit 1
fi

echo "done: $models_dir/ggml-$model.bin"
