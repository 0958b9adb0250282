"""Fetch one file of a Hugging Face repository into the hub cache of the build stage.

Usage: cache_warmer.py FILE REPO_ID [REVISION]
"""
import os
import sys

from huggingface_hub import hf_hub_download


def main() -> None:
    file_name, repo_id = sys.argv[1], sys.argv[2]
    revision = sys.argv[3] if len(sys.argv) > 3 else None
    token = os.environ.get("HUGGING_FACE_HUB_TOKEN") or None
    os.environ.setdefault("HF_HUB_ENABLE_HF_TRANSFER", "1")
    path = hf_hub_download(repo_id=repo_id, filename=file_name, revision=revision, token=token)
    print(f"cached {repo_id}/{file_name} at {path}")


if __name__ == "__main__":
    main()
