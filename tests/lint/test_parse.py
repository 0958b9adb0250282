"""The Dockerfile reader: what BuildKit's parser gives us, stages, ARG resolution, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.lint import parse

from .conftest import PINNED

HEREDOC_AND_FLAGS = """\
# syntax=docker/dockerfile:1.7
ARG BASE=python:3.11
FROM ${BASE} AS build
COPY --from=x --chmod=755 a b
ADD --checksum=sha256:abc https://example.org/y /y
RUN <<EOF
pip install foo
EOF
RUN echo a \\
# a comment inside a continuation
  && echo b
CMD ["python", "x.py"]
healthcheck NONE
ENV A="x y" B='z'
"""


def test_parser_facts_we_rely_on() -> None:
    ins = parse.parse_text(HEREDOC_AND_FLAGS, "Dockerfile")
    by_line = {i.line: i for i in ins}
    assert by_line[3].args == ("${BASE}", "AS", "build")  # no substitution by the parser
    assert by_line[4].flag("from") == "x"
    assert by_line[4].flag("chmod") == "755"
    assert by_line[5].flag("checksum") == "sha256:abc"
    run = by_line[6]
    assert (run.line, run.end_line) == (6, 8)
    assert run.heredocs[0].content == "pip install foo\n"
    assert "pip install foo" in run.text()
    cont = by_line[9]
    assert cont.end_line == 11
    assert cont.args == ("echo a   && echo b",)
    assert by_line[12].json
    assert by_line[12].args == ("python", "x.py")
    assert by_line[13].cmd == "HEALTHCHECK"  # upper-cased
    assert by_line[14].args == ("A", '"x y"', "B", "'z'")  # quotes kept


def test_escape_directive_backtick() -> None:
    text = "# escape=`\nFROM a\nRUN echo a `\n    b\nCOPY . c:\\foo\n"
    lines = text.splitlines()
    assert parse.escape_char(lines) == "`"
    ins = parse.parse_text(text, "D")
    assert (ins[1].line, ins[1].end_line) == (3, 4)
    assert parse.escape_char(["# hello", "# escape=`"]) == "\\"  # not a directive any more


def test_stages_and_arg_resolution() -> None:
    text = f"ARG BASE={PINNED}\nARG TAG\nFROM ${{BASE}} AS Base\nFROM base\nFROM py:${{TAG}}\n"
    df = parse.build(Path("D"), "D", text)
    assert [s.name for s in df.stages] == ["base", None, None]
    assert df.stages[0].base == PINNED
    assert df.stages[1].parent == 0
    assert df.stages[2].base is None
    assert df.stages[2].unresolved == ["TAG"]
    with_arg = parse.build(Path("D"), "D", text, {"TAG": "3.11", "BASE": "x:1"})
    assert with_arg.stages[2].base == "py:3.11"
    assert with_arg.stages[0].base == "x:1"
    assert with_arg.stages[1].parent == 0  # FROM base still names the stage


def test_undeclared_build_arg_is_not_used_in_from() -> None:
    df = parse.build(Path("D"), "D", "FROM py:${TAG}\n", {"TAG": "3.11"})
    assert df.final.base is None
    assert df.final.unresolved == ["TAG"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("FROM a\n\nENV A\n", 3, "ENV must have two arguments"),
        ("FROM a\nRUN <<EOF\necho\nEOF\nRUN <<EOT\necho\n", 5, "unterminated heredoc"),
        ("FROM a\nLABEL onlykey\nRUN x\n", 2, "LABEL must have two arguments"),
        ("# escape=x\nFROM a\n", 1, "invalid escape token"),
        ("FROM a\nFOO bar\n", 2, "unknown instruction FOO"),
        ("RUN x\nFROM a\n", 1, "RUN before the first FROM"),
        ("FROM\n", 1, "FROM has 0 argument(s)"),
        ("FROM a AS\n", 1, "FROM has 2 argument(s)"),
        ("FROM a\nUSER\n", 2, "USER has 0 argument(s)"),
        ("FROM a\nCOPY <<EOF\nhi\nEOF\n", 2, "COPY has 1 argument(s)"),
    ],
)
def test_parser_rejections_name_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(InputError) as e:
        parse.build(Path("bad/Dockerfile"), "bad/Dockerfile", text)
    assert e.value.file == "bad/Dockerfile"
    assert e.value.line == line
    assert words in str(e.value)
    assert str(e.value).startswith(f"bad/Dockerfile:{line}: ")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty Dockerfile"),
        (b"# only a comment\n\n", "empty Dockerfile"),
        (b"FROM a\n\x00\x01\x02", "binary file"),
        (b"FROM a\nRUN echo \xff\n", "not UTF-8"),
    ],
)
def test_bad_files(tmp_path: Path, content: bytes, words: str) -> None:
    p = tmp_path / "Dockerfile"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        parse.load(p, "Dockerfile")
    assert words in str(e.value)
    assert str(e.value).startswith("Dockerfile")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        parse.load(tmp_path / "nope", "nope")


def test_bom_and_crlf(tmp_path: Path) -> None:
    p = tmp_path / "Dockerfile"
    p.write_bytes(b"\xef\xbb\xbfFROM a\r\nUSER 10001\r\n")
    df = parse.load(p)
    assert [i.line for i in df.instructions] == [1, 2]
    assert df.final.base == "a"


# -- BuildKit's instruction parser (instructions/parse.go): flags, stage names, mounts ------


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("FROM a\nCOPY --foo a /a\n", 2, "BuildKit refuses COPY: unknown flag: --foo"),
        ("FROM a\nCOPY --checksum=sha256:ab a /a\n", 2, "unknown flag: --checksum"),
        ("FROM a\nADD --parents a /a\n", 2, "unknown flag: --parents"),
        ("FROM a\nCOPY --from a /a\n", 2, "missing a value on flag: --from"),
        ("FROM a\nCOPY --link=maybe a /a\n", 2, "expecting boolean value for flag --link"),
        ("FROM a\nCOPY --chown=1 --chown=2 a /a\n", 2, "duplicate flag specified: --chown"),
        ("FROM a\nRUN --mount type=cache true\n", 2, "missing a value on flag: --mount"),
        ("FROM a\nWORKDIR --x=1 /a\n", 2, "unknown flag: --x"),
        ("FROM --platform=linux/amd64 --pull a\n", 1, "unknown flag: --pull"),
        ("FROM a AS Bad_Name!\n", 1, "invalid name for build stage: 'Bad_Name!'"),
        ("FROM a AS 1st\n", 1, "name can't start with a number"),
        ("FROM a AS ${NAME}\n", 1, "invalid name for build stage"),
        ("# check=error=true\nFROM a AS x\nFROM b AS X\n", 3,
         'duplicate stage name "x" (first given at line 2)'),
    ],
)
def test_instruction_parser_refusals(text: str, line: int, words: str) -> None:
    with pytest.raises(InputError) as e:
        parse.build(Path("bad/Dockerfile"), "bad/Dockerfile", text)
    assert e.value.line == line
    assert words in str(e.value)
    assert e.value.hint


def test_copy_checksum_fix_names_add() -> None:
    with pytest.raises(InputError) as e:
        parse.build(Path("Dockerfile"), "Dockerfile", "FROM a\nCOPY --checksum=x a /a\n")
    assert "only ADD takes --checksum" in (e.value.hint or "")


@pytest.mark.parametrize(
    "text",
    [
        "FROM a\nCOPY --exclude=*.bin --exclude=*.pt --parents --link=false --chmod=644 a /a\n",
        "FROM a\nADD --exclude=*.bin --keep-git-dir --unpack=TRUE --checksum=abc a /a\n",
        "FROM a\nRUN --mount=type=cache,target=/c --mount=type=tmpfs,target=/t --network=none "
        "--security=sandbox --device=x true\n",
        "FROM a\nARG --anything=1 X\nSTOPSIGNAL --no SIGTERM\nHEALTHCHECK --x NONE\n",
        "FROM a\nHEALTHCHECK --interval=5s --start-interval=1s CMD true\n",
        "FROM a AS Build.Stage_2-x\nFROM build.stage_2-x\n",
        "FROM a\nCOPY -- --odd /a\n",
    ],
)
def test_flags_and_names_buildkit_accepts(text: str) -> None:
    parse.build(Path("Dockerfile"), "Dockerfile", text)


def test_duplicate_stage_name_resolves_to_the_last_and_notes_it() -> None:
    df = parse.build(Path("Dockerfile"), "Dockerfile",
                     "FROM a AS x\nFROM b AS x\nFROM c\nCOPY --from=x /f /f\n")
    ref = df.stage_by_ref("x")
    assert ref is not None and ref.index == 1  # BuildKit's findStateByName: the last
    assert [line for line, _what in df.notes] == [2]
    assert "DuplicateStageName" in df.notes[0][1]
    # a skipped check, or no error=true, builds: a note, no refusal
    for check in ("# check=error=true;skip=DuplicateStageName\n", "# check=error=false\n"):
        parse.build(Path("Dockerfile"), "Dockerfile", check + "FROM a AS x\nFROM b AS x\n")
    with pytest.raises(InputError):
        parse.build(Path("Dockerfile"), "Dockerfile", "FROM a AS x\nFROM b AS x\n",
                    {"BUILDKIT_DOCKERFILE_CHECK": "error=true"})


@pytest.mark.parametrize(
    ("flag", "want"),
    [
        ("--mount=Type=Cache,Target=/root/.cache", {"type": "cache", "target": "/root/.cache"}),
        ("--mount=type=bind,src=a,dst=/b,ro", {"type": "bind", "source": "a", "target": "/b",
                                               "readonly": "true"}),
        ("--mount=destination=/b,Source=a,rw=true",
         {"type": "bind", "source": "a", "target": "/b", "readonly": "false"}),
        ("--mount=type=secret,id=tok,env=TOK,required",
         {"type": "secret", "id": "tok", "env": "TOK", "required": ""}),
        # a CSV-quoted field: the parser drops plain quotes from a flag, escaped ones stay
        ('--mount=\\"target=/a,b\\",type=tmpfs', {"type": "tmpfs", "target": "/a,b"}),
        ("--mount=target=/x,readwrite", {"type": "bind", "target": "/x", "readonly": "false"}),
    ],
)
def test_mount_options_as_buildkit_reads_them(flag: str, want: dict[str, str]) -> None:
    ins = parse.parse_text(f"FROM a\nRUN {flag} true\n", "Dockerfile")[1]
    assert ins.mounts() == [want]
