from fastapi import APIRouter

from app.core import model_loader

router = APIRouter()


@router.post("/predict")
def predict(body: dict) -> dict:
    return {"label": model_loader.classify(body["text"])}
