import os

from huggingface_hub import snapshot_download

TARGET = "/models/embedder"

if not os.path.isdir(TARGET):
    snapshot_download("acme/embedder", local_dir=TARGET)
