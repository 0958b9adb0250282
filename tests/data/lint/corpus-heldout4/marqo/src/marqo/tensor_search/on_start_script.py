"""Work done once per process start, before the API serves requests."""
from marqo.s2_inference.s2_inference import vectorise
from marqo.tensor_search import utils
from marqo.tensor_search.enums import EnvVars


class BootstrapVespa:
    def __init__(self, config) -> None:
        self.config = config

    def run(self) -> None:
        print("Bootstrapping the vector store")


class CacheModels:
    """Warms the in-memory model cache with the preload list (downloading each model on a fresh start)."""

    def __init__(self) -> None:
        self.models = utils.read_env_vars_and_defaults(EnvVars.MARQO_MODELS_TO_PRELOAD) or []

    def run(self) -> None:
        for model in self.models:
            vectorise(model=model, content="this is a test string", device="cpu")


def on_start(config) -> None:
    for step in (BootstrapVespa(config), CacheModels()):
        step.run()
