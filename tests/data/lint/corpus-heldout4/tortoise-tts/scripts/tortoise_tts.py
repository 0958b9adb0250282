#!/usr/bin/env python3
"""Command line entry point: tortoise_tts.py --voice random "text"."""
if __name__ == "__main__":
    print("tortoise")
