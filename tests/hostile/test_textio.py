"""servelab.textio: the one safe reader of user files and standard input, and the writer."""

from __future__ import annotations

import codecs
import io
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from servelab import textio
from servelab.errors import InputError, UsageError
from servelab.textio import (
    TEXT_BYTES,
    Limit,
    ascii_int,
    decode,
    head_of,
    loads_json,
    read_bytes,
    read_text,
    write_text_atomic,
)


def test_reads_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"\xef\xbb\xbfkey: value\n")
    assert read_text(tmp_path / "f") == "key: value\n"


def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(InputError, match=r"named pipe \(FIFO\), not a regular file") as e:
        read_bytes(tmp_path / "p", stdin_ok=True)
    assert e.value.exit_code == 2
    assert "pass - to read it from standard input" in str(e.value)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_devices_are_refused_also_through_a_symlink(tmp_path: Path, target: str) -> None:
    (tmp_path / "link.yaml").symlink_to(target)
    for path in (Path(target), tmp_path / "link.yaml"):
        with pytest.raises(InputError, match="character device"):
            read_bytes(path)


def test_sockets_directories_and_dangling_links(tmp_path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    s.close()
    with pytest.raises(InputError, match="is a socket"):
        read_bytes(tmp_path / "sock")
    with pytest.raises(InputError, match="is a directory, not a manifest"):
        read_bytes(tmp_path, what="manifest")
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    with pytest.raises(InputError, match="symbolic link to nothing"):
        read_bytes(tmp_path / "gone")


def test_the_cap_counts_bytes_read_not_the_size_reported() -> None:
    """/proc files report size 0 yet hold text: they are read, and capped by what was read."""
    status = read_text(Path("/proc/self/status"))
    assert "Pid:" in status
    with pytest.raises(InputError, match="over the 20-byte limit"):
        read_bytes(Path("/proc/self/status"), max_bytes=20)


def test_the_cap_stops_reading_one_byte_past_it(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(3 * 1024 * 1024)
    with pytest.raises(InputError, match="over the 1048576-byte limit") as e:
        read_bytes(big)
    assert "SERVELAB_MAX_TEXT_BYTES" in str(e.value)


def test_a_limit_is_raised_by_its_environment_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (TEXT_BYTES.default + 10))
    monkeypatch.setenv("SERVELAB_MAX_TEXT_BYTES", "2M")
    assert len(read_bytes(big)) == TEXT_BYTES.default + 10
    for bad in ("lots", "0", "-5", "1e9", "٣"):
        monkeypatch.setenv("SERVELAB_MAX_TEXT_BYTES", bad)
        with pytest.raises(UsageError, match="SERVELAB_MAX_TEXT_BYTES"):
            TEXT_BYTES.value()


@pytest.mark.parametrize(("raw", "words"), [
    (codecs.BOM_UTF16_LE + "FROM a\n".encode("utf-16-le"), "UTF-16 (little-endian) text (it "
     "starts with a UTF-16 byte-order mark), not UTF-8"),
    (codecs.BOM_UTF16_BE + "FROM a\n".encode("utf-16-be"), "UTF-16 (big-endian)"),
    (codecs.BOM_UTF32_LE + "FROM a\n".encode("utf-32-le"), "UTF-32 (little-endian)"),
    (codecs.BOM_UTF32_BE + "FROM a\n".encode("utf-32-be"), "UTF-32 (big-endian)"),
    ("FROM alpine\n".encode("utf-16-le"), "UTF-16 (little-endian) text without a byte-order"),
    (b"FROM a\n\x00\x01\x02", "binary file, not a Dockerfile"),
    (b"FROM a\nRUN echo \xff\n", "not UTF-8 text (byte 0xff"),
])
def test_encodings_are_named_with_the_fix(raw: bytes, words: str) -> None:
    with pytest.raises(InputError) as e:
        decode(raw, "Dockerfile", what="Dockerfile")
    assert words in str(e.value)
    assert e.value.file == "Dockerfile"
    assert "fix:" in str(e.value)


def test_an_elf_binary_is_not_mistaken_for_utf16() -> None:
    with pytest.raises(InputError, match="binary file"):
        decode(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(64)), "x")


STDIN_READER = textwrap.dedent("""
    import sys
    from servelab.errors import InputError
    from servelab.textio import read_bytes
    from pathlib import Path
    try:
        data = read_bytes(Path("-"), max_bytes=1000, stdin_ok=True)
    except InputError as e:
        print("refused:", e.message)
    else:
        print("read", len(data))
""")


@pytest.mark.parametrize(("source", "expect"), [
    ("/dev/zero", "refused: <stdin>: file is over the 1000-byte limit"),
    ("/dev/null", "read 0"),
])
def test_standard_input_has_the_same_cap(source: str, expect: str) -> None:
    with Path(source).open("rb") as stdin:
        out = subprocess.run([sys.executable, "-c", STDIN_READER], stdin=stdin,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip().startswith(expect)


@pytest.mark.parametrize(("raw", "words"), [
    (b"\xff\xfek\x008\x00s\x00", "UTF-16"),
    (b"kind: Pod\n\xc3(\n", "not UTF-8 text"),
])
def test_an_in_memory_standard_input_of_bytes_that_are_not_utf8(
        raw: bytes, words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input replaced by a text stream without a file descriptor (servelab run
    in-process, as the fuzzer did): its bytes are read and decoded by servelab's decoder,
    an InputError naming the encoding, never the stream's own UnicodeDecodeError."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    data = read_bytes(Path("-"), max_bytes=1000, stdin_ok=True)
    assert data == raw
    with pytest.raises(InputError, match=words):
        decode(data, "<stdin>")


def test_dash_is_a_file_name_unless_stdin_is_allowed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        read_bytes(Path("-"))


@pytest.mark.parametrize(("text", "words"), [
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1e400}', "out of the range"),
    ('{"a": ' + "9" * 41 + "}", "41 digits"),
    ('{"a": ' + "9" * 5000 + "}", "5000 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("{not json", "invalid JSON: Expecting property name"),
])
def test_strict_json(text: str, words: str) -> None:
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        loads_json(text, "f.json")
    assert loads_json('{"a": [1, 2.5, "x"]}', "ok") == {"a": [1, 2.5, "x"]}


@pytest.mark.parametrize(("text", "value"), [
    ("3", 3), (" 42 ", 42), ("٣", None), ("²", None), ("3.0", None), ("-1", None),
    ("", None), ("9" * 19, None), ("1" * 18, int("1" * 18)),
])
def test_ascii_int_accepts_only_ascii_digits(text: str, value: int | None) -> None:
    assert ascii_int(text) == value


def test_head_of_reads_only_regular_files(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"PK\x03\x04rest")
    os.mkfifo(tmp_path / "p")
    (tmp_path / "z").symlink_to("/dev/zero")
    assert head_of(tmp_path / "f", 4) == (8, b"PK\x03\x04")
    assert head_of(tmp_path / "p", 4) is None
    assert head_of(tmp_path / "z", 4) is None


def test_writing_to_a_directory_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        write_text_atomic(tmp_path, "x")
    assert list(tmp_path.iterdir()) == []
    assert not list(tmp_path.parent.glob(f".{tmp_path.name}.*.tmp"))


def test_writing_into_a_missing_directory_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write the output"):
        write_text_atomic(tmp_path / "nope" / "out.txt", "x")
    assert list(tmp_path.iterdir()) == []


def test_writing_replaces_a_file_atomically_and_writes_devices_in_place(
        tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    write_text_atomic(Path("/dev/null"), "discarded")
    assert Path("/dev/null").is_char_device()


def test_writing_to_a_pipe_nobody_reads_fails_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(InputError, match="nobody reads"):
        write_text_atomic(tmp_path / "p", "x")
    assert (tmp_path / "p").is_fifo()


def test_every_limit_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
    limits = [v for v in vars(textio).values() if isinstance(v, Limit)]
    from servelab.lint import parse

    limits += [parse.MAX_STAGES, parse.MAX_SUBSTITUTION_DEPTH]
    for limit in limits:
        assert limit.env in doc, f"{limit.env} is not in docs/limits.md"
