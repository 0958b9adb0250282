from fastapi import FastAPI

from .models.cache import ModelCache

app = FastAPI()
model_cache = ModelCache(ttl=300)


@app.get("/")
async def root() -> dict:
    return {"message": "Immich ML"}


@app.get("/ping")
def ping() -> str:
    return "pong"


@app.post("/predict")
async def predict(model_name: str, model_type: str) -> dict:
    # the model is loaded (and downloaded into the cache folder) on the first request that needs it
    model = await model_cache.get(model_name, model_type)
    return {"model": model_name}
