#!/bin/bash
# For local use: fetch the SAM 2.1 checkpoints next to this script.
BASE_URL="https://dl.fbaipublicfiles.com/segment_anything_2/092824"
for name in sam2.1_hiera_tiny sam2.1_hiera_small sam2.1_hiera_base_plus sam2.1_hiera_large; do
    echo "Downloading ${name}.pt checkpoint..."
    wget "${BASE_URL}/${name}.pt" || { echo "Failed to download ${name}.pt"; exit 1; }
done
