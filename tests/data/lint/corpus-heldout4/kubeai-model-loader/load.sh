#!/bin/bash
# load SRC DEST: copy a model from SRC (hf://, s3://, gs://, oss://) to DEST (a directory, or
# another bucket URL). The KubeAI controller runs this image as a Job to fill a model cache.
set -euxo pipefail

src=$1
dest=$2

fetch() {  # fetch URL DIR
    case $1 in
        hf://*)  huggingface-cli download --local-dir "$2" "${1#hf://}"; rm -rf "$2/.cache" ;;
        s3://*)  aws s3 sync "$1" "$2" ;;
        gs://*)  gcloud auth activate-service-account --key-file "$GOOGLE_APPLICATION_CREDENTIALS"
                 gcloud storage rsync "$1" "$2" ;;
        oss://*) ossutil sync "$1" "$2" ;;
        *)       echo "Unsupported source url: $1"; exit 1 ;;
    esac
}

push() {  # push DIR URL
    case $2 in
        hf://*)  huggingface-cli upload "${2#hf://}" "$1" ;;
        s3://*)  aws s3 sync "$1" "$2" ;;
        gs://*)  gcloud storage rsync "$1" "$2" ;;
        oss://*) ossutil sync "$1" "$2" ;;
        *)       echo "Unsupported destination url: $2"; exit 1 ;;
    esac
}

if [[ $dest == *"://"* ]]; then
    staging=$(mktemp -d)
    fetch "$src" "$staging"
    push "$staging" "$dest"
else
    mkdir -p "$dest"
    fetch "$src" "$dest"
fi
