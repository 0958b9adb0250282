import os
from urllib.parse import urlparse


def load_file_from_url(url: str, *, model_dir: str, progress: bool = True, file_name: str | None = None) -> str:
    """Download url into model_dir unless the file is already there; return its path."""
    os.makedirs(model_dir, exist_ok=True)
    if not file_name:
        file_name = os.path.basename(urlparse(url).path)
    cached_file = os.path.abspath(os.path.join(model_dir, file_name))
    if not os.path.exists(cached_file):
        print(f'Downloading: "{url}" to {cached_file}\n')
        from torch.hub import download_url_to_file

        download_url_to_file(url, cached_file, progress=progress)
    return cached_file
