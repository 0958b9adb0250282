#!/bin/bash
set -euo pipefail
gsutil -m cp -r "${STORAGE_URI}" /mnt/models
gcloud storage rsync --recursive gs://acme-models/llama /mnt/llama
timeout 900 aws --region us-east-1 s3 sync s3://acme-models/embed /mnt/embed
azcopy copy "https://acme.blob.core.windows.net/models/ranker" /mnt/ranker --recursive
nice -n 10 rclone copy models:acme/tokenizer /mnt/tokenizer
s5cmd --numworkers 16 cp 's3://acme-models/vision/*' /mnt/vision/
sudo -u app env -i PATH="$PATH" HOME=/tmp huggingface-cli download acme/reranker
INSTALL="pip install --no-cache-dir sentencepiece"
eval "$INSTALL"
bash <<< "git clone https://github.com/acme/prompts /app/prompts"
su -c 'python -m spacy download en_core_web_sm' app
stdbuf -oL numactl --interleave=all python3 -m nltk.downloader punkt
pip $'install' protobuf
echo 1abcDEF | xargs -n1 gdown
bash -c "$EXTRA_SETUP"
exec vllm serve /mnt/models --port 8000
