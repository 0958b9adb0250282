"""Archives unpacked in a build step (servelab.lint.unpack), and the downloads they make
model weights of (downloads.build_weight_downloads) or unverified (fetch)."""

from __future__ import annotations

import pytest

from servelab.lint import downloads, fetch, scratch, unpack
from servelab.lint.shell import commands


@pytest.mark.parametrize(("line", "archives", "dest"), [
    ("tar -C /models/x -zxvf ./2*", ["./2*"], "/models/x"),
    ("tar -xzf m.tgz --directory=/m", ["m.tgz"], "/m"),
    ("tar xzf m.tgz -C /m", ["m.tgz"], "/m"),
    ("tar -xz -C /models/r", [], "/models/r"),
    ("unzip -q /tmp/a.zip -d /opt/models/b", ["/tmp/a.zip"], "/opt/models/b"),
    ("7z x m.7z -o/models", ["m.7z"], "/models"),
])
def test_extraction(line: str, archives: list[str], dest: str) -> None:
    got = unpack.extraction(commands(line)[0])
    assert got == unpack.Unpack(archives, dest)


@pytest.mark.parametrize("line", ["tar -tzf m.tgz", "tar -czf out.tgz /etc", "unzip -l a.zip",
                                  "7z l m.7z", "gzip -d x.gz"])
def test_not_an_extraction(line: str) -> None:
    assert unpack.extraction(commands(line)[0]) is None


def test_glob_names_the_saved_file() -> None:
    assert unpack.names("./2*", "2")
    assert not unpack.names("./3*", "2")
    assert unpack.names("/tmp/m.tar.gz", "m.tar.gz")


@pytest.mark.parametrize(("text", "found"), [
    ("curl -L https://x.example/get/r | tar -xz -C /models/r", True),
    ("wget -O /tmp/a https://x.example/a/1 && unzip /tmp/a -d /srv/weights", True),
    ("cd /models && wget -O a.tgz https://x.example/a/1 && tar -xzf a.tgz", True),
    ("wget -O /tmp/a.tgz https://storage.googleapis.com/acme-models/a/1 "
     "&& tar -xzf /tmp/a.tgz -C /opt/a", True),
    ("wget -O /tmp/model.tar.gz https://x.example/a/1 && tar -xzf /tmp/model.tar.gz -C /opt", True),
    # a tool or source archive unpacked elsewhere is not weights
    ("curl -L https://github.com/a/t/releases/download/v1/t | tar -xz -C /usr/local/bin", False),
    ("wget -O /tmp/s.tgz https://x.example/src/1 && tar -xzf /tmp/s.tgz -C /opt/src", False),
    # downloaded into a model folder but not unpacked (and no weight name): not judged here
    ("curl -fsSL https://x.example/a/1 -o /tmp/a && cp /tmp/a /models/a.txt", False),
])
def test_unpacked_model_downloads(text: str, found: bool) -> None:
    assert any("unpacked" in w for w in downloads.build_weight_downloads(text)) is found


def test_model_hub_url_is_weights() -> None:
    assert downloads.build_weight_downloads(
        'wget "https://tfhub.dev/acme/m/2?tf-hub-format=compressed"')
    assert not downloads.build_weight_downloads("wget https://example.org/acme/m/2")


def _unverified(text: str) -> list[str]:
    found = [u.what for u in fetch.unverified_downloads(text, lambda w: w)]
    return found + [m for _l, m in fetch.branch_builds([(1, text, "/")], lambda _t: lambda w: w)]


def test_piped_into_tar_is_an_unverified_archive() -> None:
    assert _unverified("curl -fsSL https://x.example/get/r | tar -xz -C /models/r")
    assert not _unverified("curl -fsSL https://x.example/get/r | tar -tz")


def test_weights_unpacked_unchecked_are_unverified_but_not_weights_run() -> None:
    text = "wget https://huggingface.co/a/b/resolve/main/m.tgz && tar -xzf m.tgz -C /models"
    assert any("unpacks" in m for m in _unverified(text))
    # a weight file used by a program (not unpacked) stays weights-baked's alone
    assert not _unverified("wget https://huggingface.co/a/b/resolve/main/m.pt && python x.py m.pt")


def test_unpacked_into_a_mount_lands_there() -> None:
    def lookup(_name: str) -> str | None:
        return None

    text = "curl -fsSL https://x.example/get/r | tar -xz -C /models/r"
    assert scratch.landed(text, ["/models"], lookup, "/", "/root") == {
        "curl https://x.example/get/r unpacked into /models/r"}
    assert scratch.landed(text, ["/cache"], lookup, "/", "/root") == set()
