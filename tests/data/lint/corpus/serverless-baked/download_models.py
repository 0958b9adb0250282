"""Script to download the model weights during the Docker image build."""

import os

from huggingface_hub import snapshot_download

MODEL_NAME = "microsoft/Phi-3-mini-4k-instruct"
MODEL_CACHE = "model-cache"


def download_model() -> None:
    os.makedirs(MODEL_CACHE, exist_ok=True)
    snapshot_download(repo_id=MODEL_NAME, local_dir=MODEL_CACHE)


if __name__ == "__main__":
    download_model()
