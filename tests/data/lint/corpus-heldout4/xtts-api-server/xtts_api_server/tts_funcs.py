from pathlib import Path

from xtts_api_server.modeldownloader import download_model

OFFICIAL_VERSIONS = {"v2.0.0", "v2.0.1", "v2.0.2", "v2.0.3", "main"}


class TTSWrapper:
    def __init__(self, model_folder, model_source, model_version, device, deepspeed) -> None:
        self.model_folder = model_folder
        self.model_source = model_source
        self.model_version = model_version
        self.device = device
        self.deepspeed = deepspeed
        self.model = None

    def load_model(self) -> None:
        if self.model_source == "api":
            from TTS.api import TTS

            self.model = TTS("tts_models/multilingual/multi-dataset/xtts_v2")
            return
        model_dir = Path(self.model_folder)
        if self.model_version in OFFICIAL_VERSIONS:
            download_model(model_dir, self.model_version)
        from TTS.tts.configs.xtts_config import XttsConfig
        from TTS.tts.models.xtts import Xtts

        config = XttsConfig()
        config.load_json(str(model_dir / self.model_version / "config.json"))
        self.model = Xtts.init_from_config(config)
        self.model.load_checkpoint(config, use_deepspeed=self.deepspeed,
                                   checkpoint_dir=str(model_dir / self.model_version))
        self.model.to(self.device)

    def get_speakers(self):
        return []

    def process_tts_to_file(self, text, speaker_wav, language):
        return b""
