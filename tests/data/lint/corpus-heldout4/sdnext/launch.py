#!/usr/bin/env python
"""Start SD.Next: set up the environment (installer), then start the web server."""
import argparse
import sys

import installer


def init_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--uv", action="store_true")
    parser.add_argument("--use-cuda", action="store_true")
    parser.add_argument("--log", default=None)
    parser.add_argument("--test", action="store_true", help="install, then exit")
    parser.add_argument("--optional", action="store_true")
    parser.add_argument("--quick", action="store_true", help="skip the full installer pass")
    parser.add_argument("--listen", action="store_true", help="listen on 0.0.0.0")
    parser.add_argument("--port", type=int, default=7860)
    return parser.parse_args()


def main():
    args = init_args()
    installer.args = args
    installer.check_torch()
    installer.install_requirements()
    if args.optional:
        installer.install_optional()
    if args.test:
        sys.exit(0)
    import webui

    webui.start(host="0.0.0.0" if args.listen else "127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
