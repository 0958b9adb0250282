import os

MODEL_SERVER_ALLOWED_HOST = os.environ.get("MODEL_SERVER_HOST") or "0.0.0.0"
MODEL_SERVER_PORT = int(os.environ.get("MODEL_SERVER_PORT") or "9000")
INDEXING_ONLY = os.environ.get("INDEXING_ONLY", "").lower() == "true"
INTENT_MODEL_VERSION = "onyx-dot-app/hybrid-intent-token-classifier"
INTENT_MODEL_TAG = "v1.0.3"
