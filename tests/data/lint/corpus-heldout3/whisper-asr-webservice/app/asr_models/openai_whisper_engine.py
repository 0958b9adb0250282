import whisper

from app.config import CONFIG


class OpenAIWhisperASR:
    def __init__(self) -> None:
        self.model = None

    def load_model(self) -> None:
        # whisper.load_model downloads the checkpoint into download_root when it is not there yet
        self.model = whisper.load_model(CONFIG.MODEL_NAME, device=CONFIG.DEVICE, download_root=CONFIG.MODEL_PATH)

    def transcribe(self, audio, task: str = "transcribe", language: str | None = None) -> dict:
        return self.model.transcribe(audio, task=task, language=language)
