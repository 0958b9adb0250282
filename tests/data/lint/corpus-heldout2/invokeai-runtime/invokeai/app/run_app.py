def run_app() -> None:
    import uvicorn

    uvicorn.run("invokeai.app.api_app:app", host="0.0.0.0", port=9090)
