from fastapi import FastAPI

app = FastAPI(title="InsightFace-REST")


@app.get("/health")
async def health():
    return {"status": "ok"}


@app.post("/extract")
async def extract(request: dict):
    return {"data": []}
