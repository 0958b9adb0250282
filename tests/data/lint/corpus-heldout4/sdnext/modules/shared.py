import os

data_path = os.environ.get("SD_DATADIR", "data")
models_path = os.environ.get("SD_MODELSDIR", "models")
