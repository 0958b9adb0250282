"""The TabbyAPI entry point: reads config.yml, loads the model from model_dir, serves the API."""
import uvicorn
from ruamel.yaml import YAML

from endpoints.server import app

config = YAML(typ="safe").load(open("config.yml", encoding="utf-8"))
network = config.get("network", {})
uvicorn.run(app, host=network.get("host", "127.0.0.1"), port=int(network.get("port", 5000)))
