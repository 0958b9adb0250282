import os

import gdown

WEIGHTS = {
    ("facial_recognition", "VGG-Face"): "https://github.com/serengil/deepface_models/releases/download/v1.0/vgg_face_weights.h5",
}


def home() -> str:
    return os.path.join(os.getenv("DEEPFACE_HOME", os.path.expanduser("~")), ".deepface", "weights")


def load_model(task: str, model_name: str) -> str:
    url = WEIGHTS[(task, model_name)]
    target = os.path.join(home(), os.path.basename(url))
    if not os.path.isfile(target):
        os.makedirs(home(), exist_ok=True)
        gdown.download(url, target, quiet=False)
    return target
