import os

MODELS_DIR = os.environ.get("TORTOISE_MODELS_DIR", os.path.expanduser("~/.cache/tortoise/models"))
MODELS = {
    "autoregressive.pth": "https://huggingface.co/jbetker/tortoise-tts-v2/resolve/main/.models/autoregressive.pth",
    "diffusion_decoder.pth": "https://huggingface.co/jbetker/tortoise-tts-v2/resolve/main/.models/diffusion_decoder.pth",
}


def get_model_path(model_name: str) -> str:
    """Download a checkpoint into MODELS_DIR the first time it is asked for."""
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id="Manmay/tortoise-tts", filename=model_name, cache_dir=MODELS_DIR)


class TextToSpeech:
    def __init__(self, models_dir: str = MODELS_DIR) -> None:
        self.models_dir = models_dir
