"""Facade; models are built lazily and their weights fetched into ~/.deepface/weights on first use."""
from deepface.commons import weight_utils


def build_model(task: str, model_name: str):
    return weight_utils.load_model(task, model_name)


def cli() -> None:
    import fire

    fire.Fire()
