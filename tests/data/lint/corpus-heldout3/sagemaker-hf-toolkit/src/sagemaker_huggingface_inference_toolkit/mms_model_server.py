"""Start Multi Model Server for the model in /opt/ml/model, or for the Hub model named by HF_MODEL_ID."""
import os
import subprocess

from sagemaker_inference import environment
from sagemaker_inference.model_server import (
    MMS_CONFIG_FILE,
    REQUIREMENTS_PATH,
    _create_model_server_config_file,
    _install_requirements,
)

from sagemaker_huggingface_inference_toolkit.transformers_utils import HF_API_TOKEN, _load_model_from_hub

HUB_EXPORT_DIR = os.environ.get("HF_MODEL_DIR", "/opt/ml/model")


def start_model_server(handler_service="sagemaker_huggingface_inference_toolkit.handler_service"):
    model_store = "/"
    if "HF_MODEL_ID" in os.environ:
        # the endpoint names a Hub model: fetch it before the server starts
        _load_model_from_hub(model_id=os.environ["HF_MODEL_ID"], model_dir=HUB_EXPORT_DIR, use_auth_token=HF_API_TOKEN)
        model_store = HUB_EXPORT_DIR

    env = environment.Environment()
    _create_model_server_config_file(env, handler_service)

    if os.path.exists(REQUIREMENTS_PATH):
        # code/requirements.txt shipped inside the model archive
        _install_requirements()

    subprocess.Popen(["multi-model-server", "--start", "--model-store", model_store, "--mms-config", MMS_CONFIG_FILE])
