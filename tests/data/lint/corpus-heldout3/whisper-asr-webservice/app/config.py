import os

import torch


class CONFIG:
    """Runtime settings, read from the environment."""

    ASR_ENGINE = os.getenv("ASR_ENGINE", "openai_whisper")
    DEVICE = os.getenv("ASR_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
    # model name: tiny, base, small, medium, large-v3, turbo ...
    MODEL_NAME = os.getenv("ASR_MODEL", "base")
    # where the model files are kept; fetched there when missing
    MODEL_PATH = os.getenv("ASR_MODEL_PATH", os.path.join(os.path.expanduser("~"), ".cache", "whisper"))
    MODEL_IDLE_TIMEOUT = int(os.getenv("MODEL_IDLE_TIMEOUT", 0))
