import os

from huggingface_hub import snapshot_download

HF_API_TOKEN = os.environ.get("HF_API_TOKEN")


def _load_model_from_hub(model_id: str, model_dir: str, use_auth_token=None) -> str:
    return snapshot_download(model_id, local_dir=model_dir, token=use_auth_token)
