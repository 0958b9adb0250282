#!/bin/bash
set -e
# 1. make sure the configured detection/recognition models exist (download, convert to TensorRT)
echo "Preparing models..."
python -m if_rest.prepare_models

# 2. serve the API
echo "Starting InsightFace-REST with $NUM_WORKERS workers"
exec gunicorn if_rest.api.main:app \
     -k uvicorn.workers.UvicornWorker \
     -w "$NUM_WORKERS" \
     -b 0.0.0.0:18080 \
     --log-level "$LOG_LEVEL" \
     --keep-alive 60 \
     --timeout 60
