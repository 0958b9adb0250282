#!/bin/bash
# SageMaker/cluster variant: sync the model from the S3 cache, run the launcher, push new files back on exit.
push_cache() {
    object_id="${MODEL_ID//\//--}"
    aws s3 sync "/data/models--${object_id}/" "s3://${HF_CACHE_BUCKET}/models--${object_id}/" --exclude "blobs/*"
    exit 0
}
trap push_cache SIGTERM

./sync.sh
lorax-launcher "$@" &
wait $!
push_cache
