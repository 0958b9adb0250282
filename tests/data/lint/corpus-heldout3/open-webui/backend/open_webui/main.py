import os

from fastapi import FastAPI
from sentence_transformers import SentenceTransformer

# The image was built with the embedding model in SENTENCE_TRANSFORMERS_HOME; refresh it only when asked to.
AUTO_UPDATE = os.environ.get("RAG_EMBEDDING_MODEL_AUTO_UPDATE", "").lower() == "true"
embedding_model = SentenceTransformer(
    os.environ.get("RAG_EMBEDDING_MODEL", "sentence-transformers/all-MiniLM-L6-v2"),
    device="cpu",
    local_files_only=not AUTO_UPDATE,
)

app = FastAPI()


@app.get("/health")
async def health() -> dict:
    return {"status": True}
