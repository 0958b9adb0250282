import os
from pathlib import Path

APP_ROOT = os.getenv("APP_ROOT", "/opt/sam2")
MODEL_SIZE = os.getenv("MODEL_SIZE", "base_plus")
DATA_PATH = Path(os.getenv("DATA_PATH", "/data"))
GALLERY_PATH = DATA_PATH / "gallery"
UPLOADS_PATH = DATA_PATH / "uploads"
