def serve() -> None:
    print("serving")
