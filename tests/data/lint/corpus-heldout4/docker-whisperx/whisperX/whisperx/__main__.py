import argparse


def cli() -> None:
    parser = argparse.ArgumentParser(prog="whisperx")
    parser.add_argument("audio", nargs="*")
    parser.add_argument("--model", default="small")
    parser.add_argument("--language", default=None)
    args = parser.parse_args()
    print(args)


if __name__ == "__main__":
    cli()
