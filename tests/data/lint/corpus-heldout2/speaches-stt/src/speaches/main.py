from fastapi import FastAPI


def create_app() -> FastAPI:
    app = FastAPI(title="speaches")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    # models are loaded on the first request that names one, into the mounted HF cache
    return app
