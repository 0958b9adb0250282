from . import download_utils


class TTS:
    def __init__(self, language: str) -> None:
        self.model = download_utils.load_or_download_model(language)
