from fastapi import FastAPI


def create_app() -> FastAPI:
    app = FastAPI(title="Langflow")

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app
