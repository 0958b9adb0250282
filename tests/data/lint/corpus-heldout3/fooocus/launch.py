"""Fooocus launcher: checks the Python environment, fetches the default models, then starts the web UI."""
import os

from modules.launch_util import is_installed, requirements_met, run_pip
from modules.model_loader import load_file_from_url

ROOT = os.path.dirname(os.path.abspath(__file__))
REINSTALL_ALL = os.environ.get("REINSTALL_ALL", "") == "1"

VAE_APPROX = [
    ("xlvaeapp.pth", "https://huggingface.co/lllyasviel/misc/resolve/main/xlvaeapp.pth"),
    ("vaeapp_sd15.pth", "https://huggingface.co/lllyasviel/misc/resolve/main/vaeapp_sd15.pt"),
]
DEFAULT_CHECKPOINT = (
    "juggernautXL_v8Rundiffusion.safetensors",
    "https://huggingface.co/lllyasviel/fav_models/resolve/main/fav/juggernautXL_v8Rundiffusion.safetensors",
)
DEFAULT_LORA = (
    "sd_xl_offset_example-lora_1.0.safetensors",
    "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/resolve/main/sd_xl_offset_example-lora_1.0.safetensors",
)


def prepare_environment() -> None:
    requirements = os.path.join(ROOT, "requirements_versions.txt")
    if REINSTALL_ALL or not requirements_met(requirements):
        run_pip(f'install -r "{requirements}"', "requirements")
    if not is_installed("xformers") and os.environ.get("INSTALL_XFORMERS") == "1":
        run_pip("install -U -I --no-deps xformers==0.0.23", "xformers")


def download_models() -> None:
    models = os.path.join(ROOT, "models")
    for name, url in VAE_APPROX:
        load_file_from_url(url=url, model_dir=os.path.join(models, "vae_approx"), file_name=name)
    load_file_from_url(url=DEFAULT_CHECKPOINT[1], model_dir=os.path.join(models, "checkpoints"), file_name=DEFAULT_CHECKPOINT[0])
    load_file_from_url(url=DEFAULT_LORA[1], model_dir=os.path.join(models, "loras"), file_name=DEFAULT_LORA[0])


prepare_environment()
download_models()

from webui import launch  # noqa: E402

launch()
