def serve() -> None:
    print("serving on 7860")
