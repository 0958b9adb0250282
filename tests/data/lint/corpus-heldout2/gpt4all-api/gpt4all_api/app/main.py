import os

from fastapi import FastAPI
from gpt4all import GPT4All

app = FastAPI(title="GPT4All API")
model = GPT4All(model_name=os.environ["MODEL_BIN"], model_path="/models", allow_download=False)


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
