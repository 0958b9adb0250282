import os

from fastapi import FastAPI
from transformers import pipeline

from app.config import MODEL_NAME

ROOT = os.environ["MODEL_ROOT"]
app = FastAPI()
ner = pipeline("token-classification", model=f"{ROOT}/{MODEL_NAME}")


@app.post("/ner")
def run(body: dict) -> list:
    return ner(body["text"])
