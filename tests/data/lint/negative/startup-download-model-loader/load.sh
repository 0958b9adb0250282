#!/bin/sh
# load SRC DEST: copy a model from the hub into a cache directory
set -eu
huggingface-cli download --local-dir "$2" "${1#hf://}"
