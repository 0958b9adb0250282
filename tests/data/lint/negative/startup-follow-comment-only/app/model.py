def load(path: str):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path)  # was: from_pretrained("org/name")
