import os

DEFAULT_ARGUMENTS = {
    "host": os.environ.get("LT_HOST", "127.0.0.1"),
    "port": int(os.environ.get("LT_PORT", 5000)),
    "threads": int(os.environ.get("LT_THREADS", 4)),
    "load_only": os.environ.get("LT_LOAD_ONLY"),
    "update_models": os.environ.get("LT_UPDATE_MODELS", "").lower() == "true",
}
