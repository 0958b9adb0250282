import sys

from huggingface_hub import hf_hub_download

filename, repo_id = sys.argv[1], sys.argv[2]
hf_hub_download(repo_id=repo_id, filename=filename)
