import numpy as np
import onnxruntime as ort
from fastapi import FastAPI
from tokenizers import Tokenizer

app = FastAPI()
session = ort.InferenceSession("/app/model/model.onnx")
tokenizer = Tokenizer.from_file("/app/model/tokenizer.json")


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/embed")
def embed(text: str) -> list[float]:
    enc = tokenizer.encode(text)
    ids = np.array([enc.ids], dtype=np.int64)
    mask = np.array([enc.attention_mask], dtype=np.int64)
    out = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    return out[0].mean(axis=0).tolist()
