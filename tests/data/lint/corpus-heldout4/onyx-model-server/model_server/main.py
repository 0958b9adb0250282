import shutil
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from model_server.custom_models import router as custom_models_router
from model_server.custom_models import warm_up_intent_model
from shared_configs.configs import INDEXING_ONLY

HF_CACHE_PATH = Path.home() / ".cache/huggingface"
TEMP_HF_CACHE_PATH = Path.home() / ".cache/temp_huggingface"


@asynccontextmanager
async def lifespan(app: FastAPI):
    # merge the models baked into the image into the (possibly mounted) cache
    if TEMP_HF_CACHE_PATH.is_dir():
        shutil.copytree(TEMP_HF_CACHE_PATH, HF_CACHE_PATH, dirs_exist_ok=True)
        shutil.rmtree(TEMP_HF_CACHE_PATH, ignore_errors=True)
    if not INDEXING_ONLY:
        warm_up_intent_model()
    yield


app = FastAPI(title="Onyx Model Server", lifespan=lifespan)
app.include_router(custom_models_router)


@app.get("/api/health")
async def healthcheck() -> dict:
    return {"status": "ok"}
