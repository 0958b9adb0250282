#!/bin/bash
# fetch the weights into MODEL_DIR (modelled on the install_model.sh pattern of serving images)
set -e
if [ ! -d "${MODEL_DIR}" ]; then
  huggingface-cli download "${MODEL_ID}" --local-dir "${MODEL_DIR}"
fi
