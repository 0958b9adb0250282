#!/usr/bin/env python
"""Install every available language model, or only those of --load_only_lang_codes."""
import argparse

from libretranslate.init import check_and_install_models

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--load_only_lang_codes", type=str, default="")
    args = parser.parse_args()
    codes = [c for c in args.load_only_lang_codes.split(",") if c] or None
    check_and_install_models(force=True, load_only_lang_codes=codes)
