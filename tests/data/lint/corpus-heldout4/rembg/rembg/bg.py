"""Session handling; models are fetched with pooch into U2NET_HOME (~/.u2net) when missing."""
import os

import pooch

MODEL_URLS = {
    "u2net": "https://github.com/danielgatis/rembg/releases/download/v0.0.0/u2net.onnx",
    "u2netp": "https://github.com/danielgatis/rembg/releases/download/v0.0.0/u2netp.onnx",
}


def model_home() -> str:
    return os.path.expanduser(os.getenv("U2NET_HOME", os.path.join("~", ".u2net")))


def download_models(names) -> None:
    for name in names or MODEL_URLS:
        pooch.retrieve(MODEL_URLS[name], known_hash=None, fname=f"{name}.onnx", path=model_home(), progressbar=True)


def new_session(name: str = "u2net"):
    download_models([name])
    import onnxruntime as ort

    return ort.InferenceSession(os.path.join(model_home(), f"{name}.onnx"))


def remove(data, session=None):
    session = session or new_session()
    return data
