import requests
from tqdm import tqdm


def download_file(url, destination) -> None:
    response = requests.get(url, stream=True)
    total = int(response.headers.get("content-length", 0))
    with open(destination, "wb") as file, tqdm(total=total, unit="iB", unit_scale=True) as bar:
        for data in response.iter_content(1024):
            bar.update(len(data))
            file.write(data)


def download_model(this_dir, model_version) -> None:
    """Fetch an official XTTS release into this_dir/<version> unless its files are there."""
    model_path = this_dir / f"{model_version}"
    files = {
        "config.json": f"https://huggingface.co/coqui/XTTS-v2/raw/{model_version}/config.json",
        "model.pth": f"https://huggingface.co/coqui/XTTS-v2/resolve/{model_version}/model.pth?download=true",
        "vocab.json": f"https://huggingface.co/coqui/XTTS-v2/raw/{model_version}/vocab.json",
        "speakers_xtts.pth": "https://huggingface.co/coqui/XTTS-v2/resolve/main/speakers_xtts.pth?download=true",
    }
    model_path.mkdir(parents=True, exist_ok=True)
    for filename, url in files.items():
        destination = model_path / filename
        if not destination.exists():
            print(f"[XTTS] Downloading {filename}...")
            download_file(url, destination)
