import os

import uvicorn
from easynmt import EasyNMT
from fastapi import FastAPI

model = EasyNMT("opus-mt")
fallback = EasyNMT(model_name=os.getenv("FALLBACK_MODEL", "m2m_100_418M"))
app = FastAPI()


@app.get("/translate")
def translate(text: str, target_lang: str) -> dict[str, str]:
    return {"translated": model.translate(text, target_lang=target_lang)}


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


if __name__ == "__main__":
    uvicorn.run(app, host="0.0.0.0", port=24080)
