from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware


class OpenAIStub(FastAPI):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.models = {}
        self.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"])

        @self.get("/v1/models")
        def list_models() -> dict:
            return {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}

    def register_model(self, name: str) -> None:
        self.models[name] = True
