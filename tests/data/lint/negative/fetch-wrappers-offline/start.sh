#!/bin/bash
set -e
while [ ! -f /models/ready ]; do sleep 1; done
if [ ! -d /models/llama ]; then
    echo "mount the model volume at /models" >&2
    exit 1
fi
timeout 30 sudo -u app env HF_HUB_OFFLINE=1 python -m server --model acme/llama --check
exec nice -n 5 sh -c 'HF_HUB_OFFLINE=1 vllm serve /models/llama --port 8000'
