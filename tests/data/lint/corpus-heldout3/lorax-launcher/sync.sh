#!/bin/bash
# Pull a previously cached copy of $MODEL_ID from S3 into the hub cache before the launcher starts.
object_id="${MODEL_ID//\//--}"
local_dir="${HUGGINGFACE_HUB_CACHE}/models--${object_id}"
sudo mkdir -p "$local_dir"
aws s3 sync "s3://${HF_CACHE_BUCKET}/models--${object_id}/" "$local_dir" || echo "no cached copy of $MODEL_ID"
