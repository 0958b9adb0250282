from sentence_transformers import SentenceTransformer


class Embedder:
    def __init__(self) -> None:
        self.model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")

    def encode(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts).tolist()
