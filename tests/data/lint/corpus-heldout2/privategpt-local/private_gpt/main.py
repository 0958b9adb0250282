from fastapi import FastAPI

app = FastAPI(title="PrivateGPT")


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
