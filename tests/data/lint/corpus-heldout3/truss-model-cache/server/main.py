"""Entry point of the Truss inference server image."""
import os

from truss_server import TrussServer

if __name__ == "__main__":
    port = int(os.environ.get("INFERENCE_SERVER_PORT", "8080"))
    TrussServer(http_port=port, config_path="/app/config.yaml").start()
