from huggingface_hub import snapshot_download

from ..config import get_model_path


class ModelCache:
    def __init__(self, ttl: int) -> None:
        self.ttl = ttl
        self.models: dict = {}

    async def get(self, model_name: str, model_type: str):
        key = f"{model_name}{model_type}"
        if key not in self.models:
            path = get_model_path(model_name)
            if not path.exists():
                snapshot_download(f"immich-app/{model_name}", cache_dir=path, local_dir=path)
            self.models[key] = path
        return self.models[key]
