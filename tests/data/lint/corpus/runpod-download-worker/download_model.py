import os

from huggingface_hub import snapshot_download

snapshot_download(repo_id=os.environ["MODEL_NAME"], local_dir=os.environ.get("MODEL_DIR", "/runpod-volume/model"))
