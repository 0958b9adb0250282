import os

import nltk

nltk.download("punkt")

# XTTS v2 into ~/.local/share/tts
os.environ["COQUI_TOS_AGREED"] = "1"
from TTS.api import TTS  # noqa: E402

TTS(model_name="tts_models/multilingual/multi-dataset/xtts_v2", progress_bar=True, gpu=False)
