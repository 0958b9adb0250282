"""Serge API: chats kept in redis, models (GGUF) downloaded on request into /usr/src/app/weights."""
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

app = FastAPI(title="Serge", version="0.0.1")


@app.get("/api/model/all")
async def list_of_all_models():
    return []


@app.post("/api/model/{model_name}/download")
async def download_model(model_name: str):
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id=model_name, filename="model.gguf", local_dir="/usr/src/app/weights")


app.mount("/", StaticFiles(directory="static", html=True), name="static")
