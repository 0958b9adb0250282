def load_model_on_gpus(checkpoint_path, num_gpus: int = 2):
    raise NotImplementedError
