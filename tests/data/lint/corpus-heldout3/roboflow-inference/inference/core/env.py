import os

API_KEY = os.getenv("ROBOFLOW_API_KEY")
MODEL_CACHE_DIR = os.getenv("MODEL_CACHE_DIR", "/tmp/cache")
NUM_WORKERS = int(os.getenv("NUM_WORKERS", 1))
