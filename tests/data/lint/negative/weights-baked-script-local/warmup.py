"""Import everything the server needs; the model itself is mounted at /models at run time."""

import sys

from huggingface_hub import snapshot_download  # noqa: F401  (used by the server's --fetch mode)
from transformers import AutoTokenizer


def check() -> None:
    AutoTokenizer.from_pretrained("/models/tokenizer", local_files_only=True)


if __name__ == "__main__" and "--with-model" in sys.argv:
    check()
