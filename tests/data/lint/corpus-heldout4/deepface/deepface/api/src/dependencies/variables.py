import os


class Variables:
    def __init__(self) -> None:
        self.face_recognition_models = os.getenv("DEEPFACE_FACE_RECOGNITION_MODELS")
        self.auth_token = os.getenv("DEEPFACE_AUTH_TOKEN")
