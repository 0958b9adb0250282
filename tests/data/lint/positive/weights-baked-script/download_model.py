"""Fetch the model into the image so the container starts without the hub."""

import os

from huggingface_hub import snapshot_download

MODEL_ID = os.environ.get("MODEL_ID", "Qwen/Qwen2.5-0.5B-Instruct")


def main() -> None:
    snapshot_download(repo_id=MODEL_ID, local_dir="/app/model", allow_patterns=["*.json", "*.safetensors"])


if __name__ == "__main__":
    main()
