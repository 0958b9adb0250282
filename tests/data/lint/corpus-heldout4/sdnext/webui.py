import uvicorn
from fastapi import FastAPI

app = FastAPI(title="SD.Next")


@app.get("/sdapi/v1/status")
def status():
    return {"status": "idle"}


def start(host: str, port: int) -> None:
    uvicorn.run(app, host=host, port=port)
