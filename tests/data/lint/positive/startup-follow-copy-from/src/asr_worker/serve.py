def serve(model_path: str) -> None:
    print("serving", model_path)
