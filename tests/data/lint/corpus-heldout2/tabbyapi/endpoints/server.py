from fastapi import FastAPI

app = FastAPI(title="TabbyAPI")


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "healthy"}
