from fastapi import FastAPI
from sentence_transformers import SentenceTransformer

app = FastAPI()
MODELS = "/models/sentence-transformers"


@app.post("/embed/{name}")
def embed(name: str, body: dict) -> list:
    model = SentenceTransformer(f"{MODELS}/{name}", local_files_only=True)
    return model.encode(body["texts"]).tolist()
