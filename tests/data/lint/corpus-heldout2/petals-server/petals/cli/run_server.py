"""Joins the swarm: downloads the model's blocks from the Hub into PETALS_CACHE and serves them."""
import argparse

from petals.server.server import Server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("converted_model_name_or_path")
    parser.add_argument("--port", type=int, default=31330)
    args = parser.parse_args()
    Server(args.converted_model_name_or_path, host_maddrs=[f"/ip4/0.0.0.0/tcp/{args.port}"]).run()


if __name__ == "__main__":
    main()
