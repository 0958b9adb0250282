MODEL_PATH = "/models/current"
