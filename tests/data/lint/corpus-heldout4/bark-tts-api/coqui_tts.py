import os

os.environ["COQUI_TOS_AGREED"] = "1"

_xtts = None


def tts_generation_xtts(text: str, language: str = "en", clone_wav=None) -> bytes:
    global _xtts
    if _xtts is None:
        from TTS.api import TTS

        _xtts = TTS("tts_models/multilingual/multi-dataset/xtts_v2")
    return b""
