import argparse

from model_server.app import serve

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", required=True)
parser.add_argument("--port", type=int, default=8080)
args = parser.parse_args()
serve(args.model_dir, args.port)
