from pathlib import Path

from pydantic import BaseSettings
from uvicorn.workers import UvicornWorker


class Settings(BaseSettings):
    cache_folder: str = "/cache"
    model_ttl: int = 300
    host: str = "0.0.0.0"
    port: int = 3003
    workers: int = 1

    class Config:
        env_prefix = "MACHINE_LEARNING_"


class CustomUvicornWorker(UvicornWorker):
    CONFIG_KWARGS = {"loop": "uvloop", "http": "httptools"}


settings = Settings()


def get_model_path(model_name: str) -> Path:
    return Path(settings.cache_folder) / model_name
