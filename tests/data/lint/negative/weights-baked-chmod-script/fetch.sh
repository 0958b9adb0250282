#!/bin/sh
set -e
huggingface-cli download "$MODEL_ID" --local-dir /models
