"""Released-model catalogue: resolves a model name and downloads its files on first use."""
import os
import zipfile
from pathlib import Path

import requests

MODELS_HOME = Path(os.environ.get("TTS_HOME", Path.home() / ".local" / "share" / "tts"))
RELEASES = "https://coqui.gateway.scarf.sh/v0.6.1_models"


class ModelManager:
    def __init__(self, output_prefix: Path = MODELS_HOME) -> None:
        self.output_prefix = Path(output_prefix)

    def download_model(self, model_name: str):
        model_type, lang, dataset, model = model_name.split("/")
        folder = self.output_prefix / f"{model_type}--{lang}--{dataset}--{model}"
        if not folder.exists():
            folder.mkdir(parents=True)
            url = f"{RELEASES}/{model_type}--{lang}--{dataset}--{model}.zip"
            archive = folder / "model.zip"
            with requests.get(url, stream=True, timeout=60) as r:
                r.raise_for_status()
                with open(archive, "wb") as f:
                    for chunk in r.iter_content(1 << 20):
                        f.write(chunk)
            with zipfile.ZipFile(archive) as z:
                z.extractall(folder)
            archive.unlink()
        return str(folder / "model_file.pth"), str(folder / "config.json"), {"model_name": model_name}
