from marqo.tensor_search.enums import EnvVars


def default_env_vars() -> dict:
    return {
        EnvVars.MARQO_MAX_INDEX_FIELDS: None,
        # loaded (and so downloaded) when the API starts
        EnvVars.MARQO_MODELS_TO_PRELOAD: ["hf/e5-base-v2", "open_clip/ViT-B-32/laion2b_s34b_b79k"],
        EnvVars.MARQO_MAX_CONCURRENT_INDEX: 8,
    }
