#!/bin/sh
set -eu
dest="$1"
mkdir -p "$dest"
wget -q -O "$dest/model.gguf" https://example.org/TheBloke/TinyLlama-1.1B-Chat-GGUF/tinyllama-1.1b-chat.Q4_K_M.gguf
