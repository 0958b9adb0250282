import os

from transformers import pipeline

classify = pipeline("text-classification", model=os.environ.get("MODEL_DIR", "/models/sst2"))
