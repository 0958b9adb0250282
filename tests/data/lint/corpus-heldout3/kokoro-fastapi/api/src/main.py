"""FastAPI app: OpenAI-compatible /v1/audio/speech backed by Kokoro."""
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.src.routers.openai_compatible import router as openai_router


@asynccontextmanager
async def lifespan(app: FastAPI):
    from api.src.inference.model_manager import get_manager

    manager = await get_manager()
    await manager.initialize_with_warmup()  # loads api/src/models/v1_0/kokoro-v1_0.pth
    yield


app = FastAPI(title="Kokoro TTS API", lifespan=lifespan)
app.include_router(openai_router, prefix="/v1")


@app.get("/health")
async def health_check():
    return {"status": "healthy"}
