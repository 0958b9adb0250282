#!/bin/sh
set -e
# fetch the weights on every start (slow)
huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir /tmp/model
exec vllm serve /tmp/model
