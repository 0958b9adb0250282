#!/bin/sh
set -eu
huggingface-cli download "$1" --local-dir "${2:-/mnt/models}"
