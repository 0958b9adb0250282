from flask import Flask
from flask_cors import CORS

from deepface import DeepFace, __version__
from deepface.api.src.dependencies.variables import Variables
from deepface.api.src.modules.core.routes import blueprint


def create_app() -> Flask:
    app = Flask(__name__)
    CORS(app)
    variables = Variables()
    # optional warm-up: only models named in the environment are built at start
    for name in (variables.face_recognition_models or "").split(","):
        if name.strip():
            DeepFace.build_model(task="facial_recognition", model_name=name.strip())
    app.register_blueprint(blueprint)
    print(f"Welcome to DeepFace API v{__version__}!")
    return app
