"""Downloads that land in a RUN's cache or tmpfs mount (lint/scratch.py): not baked."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.lint import parse, scratch

ENV = {"HF_HOME": "/hf"}


@pytest.mark.parametrize(
    ("text", "landed"),
    [
        ("wget -O /c/m.safetensors https://h/m.safetensors", True),
        ("wget -P /c https://h/m.safetensors", True),
        ("cd /c && wget https://h/m.safetensors", True),
        ("curl -L -o /c/m.gguf https://h/m.gguf", True),
        ("curl -L https://h/m.gguf > /c/m.gguf", True),
        ("aria2c -d /c/x https://h/m.safetensors", True),
        ("hf download org/m --local-dir /c/m", True),
        ("HF_HOME=/c hf download org/m", True),
        ("export HF_HOME=/c && hf download org/m", True),
        ("git clone https://huggingface.co/org/m /c/m", True),
        ("python -c \"snapshot_download('org/m', local_dir='/c/m')\"", True),
        # elsewhere, unknown, or copied out of the mount
        ("wget -O /models/m.safetensors https://h/m.safetensors", False),
        ("wget https://h/m.safetensors", False),
        ("hf download org/m", False),
        ("hf download org/m --local-dir /c/m && cp -r /c/m /models", False),
        ("python -c \"snapshot_download('org/m', local_dir=d)\"", False),
        ("python -c \"snapshot_download('org/m')\"", False),
        ("python -c \"m = from_pretrained('org/m', cache_dir='/c'); m.save_pretrained('/m')\"",
         False),
    ],
)
def test_landed(text: str, landed: bool) -> None:
    found = scratch.landed(text, ["/c"], ENV.get, "/app", "/root")
    assert bool(found) is landed


def test_hf_cache_from_home_and_env() -> None:
    text = "python -c \"snapshot_download('org/m')\""
    assert scratch.landed(text, ["/hf"], ENV.get, "/", "/root")
    assert scratch.landed(text, ["/root/.cache"], {}.get, "/", "/root")
    assert not scratch.landed(text, ["/root/.cache"], {}.get, "/", None)  # another user


def test_scratch_targets() -> None:
    ins = parse.build(Path("D"), "D", "FROM a\nRUN --mount=type=cache,target=${C} "
                      "--mount=Type=TMPFS,dst=t --mount=type=bind,target=/b "
                      "--mount=type=cache,target=$NOPE true\n").final.instructions[0]
    assert scratch.scratch_targets(ins, {"C": "/cache"}.get, "/w", "\\") == ["/cache", "/w/t"]
