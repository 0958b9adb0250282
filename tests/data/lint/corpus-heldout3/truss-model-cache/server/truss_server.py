"""Minimal stand-in for truss' server module: loads model/model.py and serves it over HTTP."""
import importlib.util

import uvicorn
from fastapi import FastAPI


class TrussServer:
    def __init__(self, http_port: int, config_path: str) -> None:
        self.http_port = http_port
        self.config_path = config_path

    def _load_model(self):
        spec = importlib.util.spec_from_file_location("model", "/app/model/model.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model()
        model.load()
        return model

    def start(self) -> None:
        model = self._load_model()
        app = FastAPI()

        @app.get("/v1/models/model")
        def ready() -> dict:
            return {"ready": True}

        @app.post("/v1/models/model:predict")
        def predict(body: dict) -> dict:
            return model.predict(body)

        uvicorn.run(app, host="0.0.0.0", port=self.http_port)
