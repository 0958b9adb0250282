"""Compile the prompt templates and the text-normaliser tables shipped with the server."""
import argparse
import json
import pathlib


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = pathlib.Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"digits": {str(i): w for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])}}
    (out / "normaliser.json").write_text(json.dumps(tables, indent=2))


if __name__ == "__main__":
    main()
