from fastapi import FastAPI

from . import loader


def build_app() -> FastAPI:
    app = FastAPI()

    @app.post("/generate")
    def generate(body: dict) -> dict:
        return {"text": loader.generate(body["prompt"])}

    return app
