from huggingface_hub import hf_hub_download

REPOS = {"EN": "example/tts-english", "ES": "example/tts-spanish"}


def load_or_download_model(language: str) -> str:
    return hf_hub_download(repo_id=REPOS[language], filename="checkpoint.pth")
