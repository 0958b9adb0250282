import os

from fastapi import FastAPI, Response, status

from vectorizer import VectorInput, Vectorizer

app = FastAPI()

cuda = os.getenv("ENABLE_CUDA") in ("true", "1")
vec = Vectorizer("./models/model", cuda, os.getenv("CUDA_CORE") or "cuda:0")


@app.get("/.well-known/live", response_class=Response)
@app.get("/.well-known/ready", response_class=Response)
def live_and_ready(response: Response):
    response.status_code = status.HTTP_204_NO_CONTENT


@app.post("/vectors")
async def vectors(item: VectorInput):
    vector = await vec.vectorize(item.text, item.config)
    return {"text": item.text, "vector": vector.tolist(), "dim": len(vector)}
