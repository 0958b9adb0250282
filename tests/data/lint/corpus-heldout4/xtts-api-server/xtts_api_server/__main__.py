import os
from argparse import ArgumentParser

import uvicorn

parser = ArgumentParser(description="Run the XTTS API server.")
parser.add_argument("-hs", "--host", default="localhost")
parser.add_argument("-p", "--port", default=8020, type=int)
parser.add_argument("-d", "--device", default="cuda")
parser.add_argument("-sf", "--speaker-folder", default="speakers/")
parser.add_argument("-o", "--output", default="output/")
parser.add_argument("-t", "--tunnel", default="")
parser.add_argument("-mf", "--model-folder", default="xtts_models/",
                    help="Where the XTTS models are kept; official versions are downloaded here when missing.")
parser.add_argument("-ms", "--model-source", default="local", choices=["api", "apiManual", "local"])
parser.add_argument("-v", "--version", default="v2.0.2")
parser.add_argument("--listen", action="store_true", help="Listen on 0.0.0.0")
parser.add_argument("--deepspeed", action="store_true")
args = parser.parse_args()

host_ip = "0.0.0.0" if args.listen else args.host
os.environ["DEVICE"] = args.device
os.environ["OUTPUT"] = args.output
os.environ["SPEAKER"] = args.speaker_folder
os.environ["MODEL"] = args.model_folder
os.environ["MODEL_SOURCE"] = args.model_source
os.environ["MODEL_VERSION"] = args.version
os.environ["DEEPSPEED"] = str(args.deepspeed).lower()
os.environ["TUNNEL_URL"] = args.tunnel

from xtts_api_server.server import app  # noqa: E402  (loads the model on import)

uvicorn.run(app, host=host_ip, port=args.port)
