from fastapi import FastAPI

from api.settings import MODEL_PATH

app = FastAPI()


@app.get("/health")
def health() -> dict:
    return {"model": MODEL_PATH}
