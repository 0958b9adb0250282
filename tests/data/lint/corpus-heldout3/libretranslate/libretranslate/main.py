import argparse
import os
import sys

from libretranslate.default_values import DEFAULT_ARGUMENTS
from libretranslate.init import boot


def get_args():
    parser = argparse.ArgumentParser(description="LibreTranslate - Free and Open Source Translation API")
    parser.add_argument("--host", default=DEFAULT_ARGUMENTS["host"])
    parser.add_argument("--port", type=int, default=DEFAULT_ARGUMENTS["port"])
    parser.add_argument("--threads", type=int, default=DEFAULT_ARGUMENTS["threads"])
    parser.add_argument("--load-only", default=DEFAULT_ARGUMENTS["load_only"])
    parser.add_argument("--update-models", action="store_true", default=DEFAULT_ARGUMENTS["update_models"])
    return parser.parse_args()


def main():
    args = get_args()
    load_only = args.load_only.split(",") if args.load_only else None
    boot(load_only, args.update_models)
    if os.environ.get("LT_POWERCYCLE"):
        sys.exit(0)
    from libretranslate.app import create_app

    create_app(args).run(host=args.host, port=args.port)
