#!/bin/bash
set -e
aws s3 cp /var/log/boot.log "s3://acme-logs/boot-$(hostname).log"
gsutil -m cp /tmp/metrics.json gs://acme-metrics/
rclone copy /app/reports acme-reports:daily
SERVE="python -m server --model /mnt/models/llama"
timeout 5 curl -fsS http://127.0.0.1:8000/health || true
eval "$SERVE" &
exec sudo -u app nice -n 5 env -i PATH=/usr/bin:/bin python -m server --model /mnt/models/llama
