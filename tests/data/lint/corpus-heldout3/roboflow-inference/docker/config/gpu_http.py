"""HTTP app of the GPU inference server. Models are fetched from the Roboflow API on the first
request that names them (model_id and api_key come with the request) and kept in MODEL_CACHE_DIR."""
from inference.core.env import MODEL_CACHE_DIR
from inference.core.interfaces.http.http_api import HttpInterface
from inference.core.managers.base import ModelManager
from inference.core.registries.roboflow import RoboflowModelRegistry
from inference.models.utils import ROBOFLOW_MODEL_TYPES

model_registry = RoboflowModelRegistry(ROBOFLOW_MODEL_TYPES)
model_manager = ModelManager(model_registry=model_registry, cache_dir=MODEL_CACHE_DIR)
interface = HttpInterface(model_manager)
app = interface.app
