from fastapi import FastAPI
from huggingface_hub import Repository

app = FastAPI()


@app.on_event("startup")
def fetch_tagger() -> None:
    Repository(local_dir="/tmp/tagger", clone_from="SmilingWolf/wd-v1-4-vit-tagger-v2")
