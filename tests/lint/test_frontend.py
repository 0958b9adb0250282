"""The frontend agreement table: servelab reads Dockerfiles as today's BuildKit frontend does.

Each row is an input and the value BuildKit's current Dockerfile frontend gives for it,
written here from its documented semantics and its sources (moby/buildkit
frontend/dockerfile/parser/parser.go and directives.go, shell/lex.go, dockerfile2llb's
defaultArgs and buildMetaArgs; docs/lint.md#how-dockerfiles-are-read says which version
each form needs). Heredocs, parser directives, every word operator of the shell lexer,
re-declared ARGs and the automatic platform arguments each have their table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.lint import frontend, parse, words
from servelab.lint.image import Analysis

ERROR = object()  # BuildKit refuses the input

# -- heredocs ---------------------------------------------------------------------------------
# (Dockerfile text, instruction index) -> [(name, content the build sees, expand, chomp, fd)]
HEREDOCS: list[tuple[str, str, int, object]] = [
    ("plain", "FROM a\nRUN <<EOF\necho one\nEOF\n", 1, [("EOF", "echo one\n", True, False, 0)]),
    ("blank after <<", "FROM a\nRUN << EOF\necho one\nEOF\n", 1,
     [("EOF", "echo one\n", True, False, 0)]),
    ("blanks and redirect", "FROM a\nRUN <<   END  > /tmp/out\nline\nEND\n", 1,
     [("END", "line\n", True, False, 0)]),
    ("tab strip", "FROM a\nRUN <<-EOF\n\tfirst\n\t\tsecond\n  third\n\tEOF\n", 1,
     [("EOF", "first\nsecond\n  third\n", True, True, 0)]),
    ("double-quoted: no expansion", 'FROM a\nRUN <<"EOF"\necho $HOME\nEOF\n', 1,
     [("EOF", "echo $HOME\n", False, False, 0)]),
    ("single-quoted: no expansion", "FROM a\nRUN <<'EOF'\necho $HOME\nEOF\n", 1,
     [("EOF", "echo $HOME\n", False, False, 0)]),
    ("partly quoted", 'FROM a\nRUN <<E"O"F\nx\nEOF\n', 1, [("EOF", "x\n", False, False, 0)]),
    ("quoted chomp", "FROM a\nRUN <<-'EOF'\n\tx\n\tEOF\n", 1, [("EOF", "x\n", False, True, 0)]),
    ("two on one line", "FROM a\nRUN python3 - <<PY && sh <<SH\nprint(1)\nPY\necho 2\nSH\n", 1,
     [("PY", "print(1)\n", True, False, 0), ("SH", "echo 2\n", True, False, 0)]),
    ("COPY", "FROM a\nCOPY <<EOF /etc/app.conf\nkey=value\nEOF\n", 1,
     [("EOF", "key=value\n", True, False, 0)]),
    ("ADD two files", "FROM a\nADD <<one <<two /dst/\n1\none\n2\ntwo\n", 1,
     [("one", "1\n", True, False, 0), ("two", "2\n", True, False, 0)]),
    ("file descriptor", "FROM a\nRUN 3<<EOF cat /dev/fd/3\nx\nEOF\n", 1,
     [("EOF", "x\n", True, False, 3)]),
    ("dash name after a blank", "FROM a\nRUN << -EOF\nx\n-EOF\n", 1,
     [("-EOF", "x\n", True, False, 0)]),
    ("unexpanded variable name", "FROM a\nRUN <<$END\nx\n$END\n", 1,
     [("$END", "x\n", True, False, 0)]),
    ("empty body", "FROM a\nRUN <<EOF\nEOF\n", 1, [("EOF", "", True, False, 0)]),
    ("terminator with CRLF", "FROM a\r\nRUN <<EOF\r\nwin\r\nEOF\r\nUSER 1\r\n", 1,
     [("EOF", "win\r\n", True, False, 0)]),
    ("ONBUILD RUN", "FROM a\nONBUILD RUN <<EOF\nx\nEOF\n", 1, [("EOF", "x\n", True, False, 0)]),
    ("JSON form has none", 'FROM a\nRUN ["<<EOF"]\n', 1, []),
    ("quoted operator has none", "FROM a\nRUN echo '<<EOF'\n", 1, []),
    ("ENV takes none", "FROM a\nENV X=<<EOF\n", 1, []),
    ("terminator must match whole line", "FROM a\nRUN <<EOF\nEOF2\n EOF\nEOF\n", 1,
     [("EOF", "EOF2\n EOF\n", True, False, 0)]),
    ("unterminated", "FROM a\nRUN <<EOF\nnever ends\n", 1, ERROR),
    # the line's words are read with errors ignored: an open quote opens no heredoc
    ("unterminated quote", "FROM a\nRUN <<'EOF\nUSER 1\n", 1, []),
]


@pytest.mark.parametrize(("text", "index", "expected"),
                         [c[1:] for c in HEREDOCS], ids=[c[0] for c in HEREDOCS])
def test_heredocs(text: str, index: int, expected: object) -> None:
    if expected is ERROR:
        with pytest.raises(frontend.FrontendError):
            frontend.parse(text)
        return
    cmd = frontend.parse(text).commands[index]
    assert [(h.name, h.content, h.expand, h.chomp, h.fd) for h in cmd.heredocs] == expected


def test_heredoc_lines_and_following_instruction() -> None:
    cmds = frontend.parse("FROM a\nRUN << EOF\nA\nB\nEOF\nUSER 1\n").commands
    assert [(c.cmd, c.start_line, c.end_line) for c in cmds] == [
        ("FROM", 1, 1), ("RUN", 2, 5), ("USER", 6, 6)]


def test_blank_between_dash_and_name_is_no_heredoc() -> None:
    # ``<<- EOF`` splits into the words "<<-" and "EOF": the frontend opens no heredoc and
    # reads the body as instructions
    cmds = frontend.parse("FROM a\nRUN <<- EOF\nUSER 1\n").commands
    assert [c.cmd for c in cmds] == ["FROM", "RUN", "USER"]
    assert cmds[1].heredocs == ()


@pytest.mark.parametrize(("syntax", "noted"), [
    ("", True), ("# syntax=docker/dockerfile:1.15\n", True),
    ("# syntax=docker/dockerfile:1\n", False), ("# syntax=docker/dockerfile:1.16\n", False),
    ("# syntax=docker.io/docker/dockerfile:labs\n", False),
])
def test_heredoc_note_for_older_builders(syntax: str, noted: bool) -> None:
    text = syntax + "FROM a\nRUN << EOF\nx\nEOF\n"
    notes = frontend.parse(text).notes
    assert [n for n, _ in notes] == ([text.count("\n", 0, text.index("RUN")) + 1] if noted
                                     else [])
    assert frontend.parse(syntax + "FROM a\nRUN <<EOF\nx\nEOF\n").notes == []


# -- parser directives -----------------------------------------------------------------------
# text -> (escape, [directive names in order]) or ERROR
DIRECTIVES: list[tuple[str, str, object]] = [
    ("check before escape", "# check=skip=all\n# escape=`\nFROM a\n", ("`", ["check", "escape"])),
    ("all three, any order", "# escape=`\n# check=error=true\n# syntax=docker/dockerfile:1\n"
     "FROM a\n", ("`", ["escape", "check", "syntax"])),
    ("key case and blanks", "#  ESCAPE =  `  \nFROM a\n", ("`", ["escape"])),
    ("leading blanks", "   # escape=`\nFROM a\n", ("`", ["escape"])),
    ("after a comment", "# hello\n# escape=`\nFROM a\n", ("\\", [])),
    ("after a blank line", "\n# escape=`\nFROM a\n", ("\\", [])),
    ("after an instruction", "FROM a\n# escape=`\n", ("\\", [])),
    ("unknown key ends them", "# foo=bar\n# escape=`\nFROM a\n", ("\\", [])),
    ("empty value is a comment", "# escape=\n# check=x\nFROM a\n", ("\\", [])),
    ("byte order mark", "\ufeff# escape=`\nFROM a\n", ("`", ["escape"])),
    ("escape twice", "# escape=`\n# escape=\\\nFROM a\n", ERROR),
    ("check twice", "# check=a\n# check=b\nFROM a\n", ERROR),
    ("bad escape", "# escape=x\nFROM a\n", ERROR),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in DIRECTIVES],
                         ids=[c[0] for c in DIRECTIVES])
def test_directives(text: str, expected: object) -> None:
    if expected is ERROR:
        with pytest.raises(frontend.FrontendError) as e:
            frontend.parse(text)
        assert e.value.line in {1, 2}
        return
    parsed = frontend.parse(text)
    assert (parsed.escape, [d.name for d in parsed.directives]) == expected
    assert parse.escape_char(text.splitlines()) == parsed.escape


def test_escape_directive_changes_continuation() -> None:
    text = "# check=skip=all\n# escape=`\nFROM a\nRUN echo `\n  b\nCOPY x c:\\\nUSER 1\n"
    cmds = frontend.parse(text).commands
    assert [(c.cmd, c.value) for c in cmds] == [
        ("FROM", ("a",)), ("RUN", ("echo   b",)), ("COPY", ("x", "c:\\")), ("USER", ("1",))]


def test_check_before_escape_gets_a_note() -> None:
    notes = frontend.parse("# check=skip=all\n# escape=`\nFROM a\n").notes
    assert [n for n, _ in notes] == [1]


# -- the shell lexer: every word operator ----------------------------------------------------
ENV = {"V": "value", "EMPTY": "", "IMAGE": "python:3.11@sha256:abc", "PATHV": "/usr/local/bin/py",
       "TAG": "12.4-devel-devel", "STAR": "a*b", "NL": "x\ny"}
# (word, expected value or ERROR, names without a value that decide it)
OPERATORS: list[tuple[str, object, list[str]]] = [
    ("$V/${V}", "value/value", []),
    ("${UNSET}", "", ["UNSET"]),
    ("$1$", "$", ["1"]),
    # :- and -
    ("${UNSET:-w}", "w", []), ("${EMPTY:-w}", "w", []), ("${V:-w}", "value", []),
    ("${UNSET-w}", "w", []), ("${EMPTY-w}", "", []), ("${UNSET:-$V}", "value", []),
    ("${V:-$UNSET2}", "value", []), ("${UNSET:-${UNSET2}}", "", ["UNSET2"]),
    # :+ and +
    ("${V:+w}", "w", []), ("${EMPTY:+w}", "", []), ("${UNSET:+w}", "", []),
    ("${EMPTY+w}", "w", []), ("${UNSET+w}", "", []), ("${V:+$UNSET2}", "", ["UNSET2"]),
    ("${UNSET:+$UNSET2}", "", []),
    # :? and ?
    ("${V:?}", "value", []), ("${V?msg}", "value", []), ("${EMPTY?msg}", "", []),
    ("${EMPTY:?msg}", ERROR, ["EMPTY"]), ("${UNSET?msg}", ERROR, ["UNSET"]),
    ("${UNSET:?}", ERROR, ["UNSET"]),
    # # and ##
    ("${PATHV#*/}", "usr/local/bin/py", []), ("${PATHV##*/}", "py", []),
    ("${V#v?l}", "ue", []), ("${V#x}", "value", []), ("${V#}", "value", []),
    ("${UNSET#x}", "", ["UNSET"]), ("${STAR#a\\*}", "b", []), ("${STAR#a*}", "*b", []),
    ("${V#[v]}", "value", []),  # no bracket expressions: "[" is literal
    # % and %%
    ("${IMAGE%%@*}", "python:3.11", []), ("${IMAGE%:*}", "python:3.11@sha256", []),
    ("${IMAGE%%:*}", "python", []),
    ("${PATHV%/*}", "/usr/local/bin", []), ("${PATHV%%/*}", "", []), ("${V%u?}", "val", []),
    ("${V%%}", "value", []), ("${STAR%\\*b}", "a", []),
    # / and //
    ("${TAG/devel/runtime}", "12.4-runtime-devel", []),
    ("${TAG//devel/runtime}", "12.4-runtime-runtime", []),
    ("${PATHV/\\//_}", "_usr/local/bin/py", []), ("${PATHV//\\//_}", "_usr_local_bin_py", []),
    ("${V/a*/A}", "vA", []), ("${V/?/}", "alue", []), ("${V//x/y}", "value", []),
    ("${V/#v/V}", "value", []),  # no anchors: "#v" is literal
    ("${V/%e/E}", "value", []), ("${V/l/$V}", "vavalueue", []),
    ("${UNSET/a/b}", "", ["UNSET"]), ("${V/}", ERROR, []), ("${V//a}", ERROR, []),
    ("${NL/x*/z}", "z\ny", []),  # "*" stops at a newline, as in Go's regexp
    # quotes and escapes
    ("'$V'", "$V", []), ('"$V"', "value", []), ("\\$V", "$V", []), ('"a\\"b"', 'a"b', []),
    # refused forms
    ("${V:#x}", ERROR, []), ("${V:%x}", ERROR, []), ("${V=x}", ERROR, []), ("${:-x}", ERROR, []),
    ("${}", ERROR, []), ("${V", ERROR, []), ("${V#\\q}", ERROR, []), ("'open", ERROR, []),
]


@pytest.mark.parametrize(("word", "expected", "unresolved"), OPERATORS,
                         ids=[c[0] for c in OPERATORS])
def test_word_operators(word: str, expected: object, unresolved: list[str]) -> None:
    out = words.process_word(word, ENV.get)
    if expected is ERROR:
        assert out.error
    else:
        assert out.error is None
        assert out.value == expected
    assert out.unresolved == unresolved


def test_backtick_escape_word() -> None:
    assert words.process_word("`$V", ENV.get, "`").value == "$V"
    assert words.process_word("${PATHV##*/}`$", ENV.get, "`").value == "py$"


# -- ARGs re-declared -------------------------------------------------------------------------
PINNED = "img@sha256:" + "c" * 64
# (Dockerfile text, build args) -> base of the last stage (None: unresolved)
REDECLARED: list[tuple[str, str, dict[str, str], str | None]] = [
    ("global without value keeps it", "ARG V=1\nARG V\nFROM img:${V}\n", {}, "img:1"),
    ("global set twice", "ARG V=1\nARG V=2\nFROM img:${V}\n", {}, "img:2"),
    ("build arg wins", "ARG V=1\nARG V\nFROM img:${V}\n", {"V": "3"}, "img:3"),
    ("later default uses earlier", "ARG A=x\nARG B=${A}-y\nARG A\nFROM i:${B}-${A}\n", {},
     "i:x-y-x"),
    ("self reference", "ARG V=a\nARG V=${V}b\nFROM i:${V}\n", {}, "i:ab"),
    ("quoted default", "ARG V=\"a b\"\nFROM i:${V#a?}\n", {}, "i:b"),
    ("single quotes protect", "ARG V='$X'\nFROM i:${V#$}\n", {"X": "no"}, "i:X"),
    ("never valued", "ARG V\nARG V\nFROM img:${V}\n", {}, None),
    ("undeclared build arg unused", "FROM img:${V}\n", {"V": "1"}, None),
]


@pytest.mark.parametrize(("text", "build_args", "base"), [c[1:] for c in REDECLARED],
                         ids=[c[0] for c in REDECLARED])
def test_redeclared_global_args(text: str, build_args: dict[str, str], base: str | None) -> None:
    assert parse.build(Path("D"), "D", text, build_args).final.base == base


# (Dockerfile text, build args) -> value of V at the end of the last stage
STAGE_ARGS: list[tuple[str, str, dict[str, str], str | None]] = [
    ("stage ARG takes the global", "ARG V=1\nFROM a\nARG V\n", {}, "1"),
    ("global kept after redeclare", "ARG V=1\nARG V\nFROM a\nARG V\n", {}, "1"),
    ("stage default wins", "ARG V=1\nFROM a\nARG V=2\n", {}, "2"),
    ("build arg wins in stage", "ARG V=1\nFROM a\nARG V=2\n", {"V": "9"}, "9"),
    ("global not visible undeclared", "ARG V=1\nFROM a\nRUN true\n", {}, None),
    ("automatic arg declared in stage", "FROM a\nARG TARGETARCH\nARG V=$TARGETARCH\n", {},
     "amd64"),
    ("stage ARG operators", "ARG I=reg/img:1@sha256:ab\nFROM a\nARG I\nARG V=${I%%@*}\n", {},
     "reg/img:1"),
]


@pytest.mark.parametrize(("text", "build_args", "value"), [c[1:] for c in STAGE_ARGS],
                         ids=[c[0] for c in STAGE_ARGS])
def test_stage_args(text: str, build_args: dict[str, str], value: str | None,
                    tmp_path: Path) -> None:
    df = parse.build(Path("D"), "D", text, build_args)
    assert Analysis(df, tmp_path, build_args).state().lookup("V") == value


# -- automatic arguments ------------------------------------------------------------------------
AUTOMATIC = {
    "BUILDPLATFORM": "linux/amd64", "BUILDOS": "linux", "BUILDARCH": "amd64",
    "BUILDVARIANT": "", "BUILDOSVERSION": "", "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux", "TARGETARCH": "amd64", "TARGETVARIANT": "", "TARGETOSVERSION": "",
    "TARGETSTAGE": "default",
}


@pytest.mark.parametrize("name", sorted(AUTOMATIC))
def test_automatic_args_resolve(name: str) -> None:
    df = parse.build(Path("D"), "D", f"FROM img:x${{{name}}}\n")
    assert df.final.unresolved == []
    assert df.final.base == f"img:x{AUTOMATIC[name]}"


@pytest.mark.parametrize("name", ["BUILDKIT_INLINE_CACHE", "BUILDKIT_SBOM_SCAN_STAGE",
                                  "BUILDKIT_SYNTAX", "BUILDKIT_CONTEXT_KEEP_GIT_DIR"])
def test_buildkit_options_are_never_unresolved(name: str) -> None:
    df = parse.build(Path("D"), "D", f"ARG {name}\nFROM img${{{name}}}\n")
    assert (df.final.unresolved, df.final.base) == ([], "img")


def test_automatic_args_follow_build_args() -> None:
    df = parse.build(Path("D"), "D", "FROM img:${TARGETARCH}\n", {"TARGETARCH": "arm64"})
    assert df.final.base == "img:arm64"


# -- what the rest of lint sees --------------------------------------------------------------


def test_required_arg_is_a_stage_error_not_a_crash() -> None:
    df = parse.build(Path("D"), "D", "ARG BASE\nFROM ${BASE:?set-BASE}\n")
    assert df.final.base is None
    assert df.final.unresolved == ["BASE"]
    assert df.final.error == "BASE: set-BASE"


def test_parser_error_names_the_line() -> None:
    with pytest.raises(InputError) as e:
        parse.build(Path("D"), "D", "FROM a\nRUN ok\nRUN <<EOF\nx\n")
    assert e.value.line == 3
    assert "unterminated heredoc" in str(e.value)


# -- the binding servelab used before ------------------------------------------------------


def _fixture_dockerfiles() -> list[Path]:
    root = Path(__file__).resolve().parents[1] / "data"
    return sorted(p for p in root.rglob("*") if p.is_file() and (
        p.name.endswith(".Dockerfile") or p.name.startswith("Dockerfile"))
        and not p.name.endswith(".dockerignore"))


def test_same_instructions_as_the_old_binding_on_every_fixture() -> None:
    """Where BuildKit v0.12.5 (the PyPI ``dockerfile`` binding servelab used before) reads a
    fixture at all, the frontend gives the same instructions, lines, flags and values: the
    rules see what they saw. Left out: what the old parser refuses or misreads (a blank
    after ``<<``), NUL bytes and non-ASCII text (the binding mangled non-ASCII flags)."""
    dockerfile = pytest.importorskip("dockerfile")
    compared = 0
    for path in _fixture_dockerfiles():
        text = path.read_bytes().decode("utf-8", errors="replace")
        if not text.isascii() or "\x00" in text or "<< " in text:
            continue
        try:
            old = list(dockerfile.parse_string(text))
        except dockerfile.GoParseError:
            continue
        new = frontend.parse(text).commands
        assert [(c.cmd.upper(), c.sub_cmd, c.json, c.start_line, c.end_line, tuple(c.flags),
                 tuple(c.value), tuple((h.name, h.content) for h in c.heredocs))
                for c in old] == [
                (c.cmd, c.sub_cmd, c.json, c.start_line, c.end_line, c.flags, c.value,
                 tuple((h.name, h.content) for h in c.heredocs)) for c in new], path
        compared += 1
    assert compared >= 300


# -- COPY --parents (Dockerfile frontend 1.20+) ---------------------------------------------
@pytest.mark.parametrize(
    ("copy", "where"),
    [
        ("COPY --parents x/y/a.sh /p/", "/p/x/y/a.sh"),
        ("COPY --parents ./x/./y/a.sh /p/", "/p/y/a.sh"),
        ("COPY --parents x/y /p/", "/p/x/y/a.sh"),
        ("COPY --parents x/*/a.sh /p/", "/p/x/y/a.sh"),
        ("COPY --parents=false x/y/a.sh /p/", "/p/a.sh"),
        ("COPY x/y/a.sh /p/", "/p/a.sh"),
    ],
)
def test_copy_parents_keeps_the_path(copy: str, where: str, tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "y" / "a.sh").write_text("true\n")
    df = parse.build(Path("D"), "D", f"FROM a\n{copy}\n")
    analysis = Analysis(df, tmp_path)
    state = analysis.state()
    found = analysis.source_of(where, state)
    assert found is not None and found.context_path is not None
    assert found.context_path.name == "a.sh"
    others = {"/p/x/y/a.sh", "/p/y/a.sh", "/p/a.sh"} - {where}
    assert all(analysis.source_of(p, state) is None for p in others)


# -- COPY/ADD heredoc bodies (ExpandRaw: SkipProcessQuotes, escape \) ----------------------
@pytest.mark.parametrize(
    ("body", "want"),
    [
        ("url=$U\n", "url=https://h/m\n"),
        ("echo '$U' \"${U}\"\n", "echo 'https://h/m' \"https://h/m\"\n"),
        ("echo \\$U $NOPE.\n", "echo $U .\n"),
        ("port=${PORT:-8000}\n", "port=8000\n"),
        ("plain text\n", "plain text\n"),
    ],
)
def test_heredoc_body_expansion(body: str, want: str) -> None:
    assert words.expand_heredoc(body, {"U": "https://h/m"}.get).value == want


def test_copy_heredoc_written_expanded_unless_quoted(tmp_path: Path) -> None:
    text = ("FROM a\nARG U=https://h/m\nCOPY --chown=1:1 <<EOT /a.sh\nget $U\nEOT\n"
            "COPY <<'EOT' /b.sh\nget $U\nEOT\n")
    analysis = Analysis(parse.build(Path("D"), "D", text), tmp_path)
    state = analysis.state()
    assert state.files["/a.sh"].inline == "get https://h/m\n"
    assert state.files["/b.sh"].inline == "get $U\n"


def test_bind_mount_source_and_target_take_arg_values(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "fetch.sh").write_text("true\n")
    df = parse.build(Path("D"), "D", "FROM a\nARG T=/mnt/t S=tools\n"
                     "RUN --mount=Type=Bind,Source=${S},Dst=${T} sh /mnt/t/fetch.sh\n")
    analysis = Analysis(df, tmp_path)
    run = df.final.instructions[-1]
    state = analysis.with_binds(analysis.state(), run)
    found = analysis.source_of("/mnt/t/fetch.sh", state)
    assert found is not None and found.context_path == tmp_path / "tools" / "fetch.sh"


@pytest.mark.parametrize(("syntax", "noted"), [
    ("", {"ADD --exclude", "COPY --exclude", "COPY --parents"}),
    ("# syntax=docker/dockerfile:1.18\n", {"ADD --exclude", "COPY --exclude", "COPY --parents"}),
    ("# syntax=docker/dockerfile:1.19\n", {"COPY --parents"}),
    ("# syntax=docker/dockerfile:1.7-labs\n", set()),
    ("# syntax=docker/dockerfile:1.6-labs\n", {"ADD --exclude", "COPY --exclude",
                                               "COPY --parents"}),
    ("# syntax=docker/dockerfile:1\n", set()), ("# syntax=docker/dockerfile:1.20\n", set()),
])
def test_exclude_and_parents_notes_for_older_builders(syntax: str, noted: set[str]) -> None:
    text = syntax + "FROM a\nADD --exclude=*.bin x /x\nCOPY --parents --exclude=a y /y\n"
    notes = frontend.parse(text).notes
    assert {what.split(":", 1)[0] for _n, what in notes} == noted


@pytest.mark.parametrize(
    ("copy", "path", "known"),
    [
        ("COPY --exclude=*.sh s/ /o/", "/o/a.sh", False),
        ("COPY --exclude=*.sh s/ /o/", "/o/b.py", True),
        ("COPY --exclude=a.* s/a.sh /o/", "/o/a.sh", False),
        ("COPY --exclude=*.py s/* /o/", "/o/a.sh", True),
        ("COPY s/ /o/", "/o/a.sh", True),
    ],
)
def test_copy_exclude_leaves_files_out(copy: str, path: str, known: bool,
                                       tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a.sh").write_text("true\n")
    (tmp_path / "s" / "b.py").write_text("pass\n")
    analysis = Analysis(parse.build(Path("D"), "D", f"FROM a\n{copy}\n"), tmp_path)
    assert (analysis.source_of(path, analysis.state()) is not None) is known
