import argparse

from huggingface_hub import snapshot_download

ap = argparse.ArgumentParser()
ap.add_argument("--out")
snapshot_download("stabilityai/sd-turbo", local_dir=ap.parse_args().out)
