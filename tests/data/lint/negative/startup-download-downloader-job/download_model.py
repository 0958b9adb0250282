import os

from huggingface_hub import snapshot_download

snapshot_download(os.environ["MODEL_ID"], local_dir=os.environ.get("TARGET", "/models"))
