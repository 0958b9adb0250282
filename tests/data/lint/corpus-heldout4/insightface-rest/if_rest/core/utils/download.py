import requests


def download(url: str, path: str) -> str:
    r = requests.get(url, stream=True, timeout=60)
    r.raise_for_status()
    with open(path, "wb") as f:
        for chunk in r.iter_content(chunk_size=1 << 20):
            f.write(chunk)
    return path


def download_from_gdrive(file_id: str, path: str) -> str:
    return download(f"https://drive.google.com/uc?export=download&id={file_id}", path)
