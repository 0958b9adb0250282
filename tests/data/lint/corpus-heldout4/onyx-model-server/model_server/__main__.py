import uvicorn

from model_server.main import app
from shared_configs.configs import MODEL_SERVER_ALLOWED_HOST, MODEL_SERVER_PORT

if __name__ == "__main__":
    print(f"Starting Onyx Model Server on http://{MODEL_SERVER_ALLOWED_HOST}:{MODEL_SERVER_PORT}/")
    uvicorn.run(app, host=MODEL_SERVER_ALLOWED_HOST, port=MODEL_SERVER_PORT)
