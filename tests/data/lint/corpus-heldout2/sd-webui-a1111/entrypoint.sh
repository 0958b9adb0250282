#!/bin/bash
set -Eeuo pipefail
# link the model folders of the /data volume into the webui tree
mkdir -p /data/config/auto /data/models/Stable-diffusion /data/models/Lora /output
for d in Stable-diffusion Lora VAE; do
  rm -rf "${ROOT}/models/$d"
  ln -sT "/data/models/$d" "${ROOT}/models/$d"
done
exec "$@"
