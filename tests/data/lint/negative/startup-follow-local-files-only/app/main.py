from contextlib import asynccontextmanager

from fastapi import FastAPI
from transformers import AutoModel


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.model = AutoModel.from_pretrained("BAAI/bge-small-en-v1.5", local_files_only=True)
    yield


app = FastAPI(lifespan=lifespan)
