import os

from huggingface_hub import snapshot_download

TARGET = "/app/assets/embedder"


def assets_present(path: str) -> bool:
    return os.path.isdir(path) and bool(os.listdir(path))


def main() -> None:
    if assets_present(TARGET):
        return
    snapshot_download("acme/embedder", local_dir=TARGET)


if __name__ == "__main__":
    main()
