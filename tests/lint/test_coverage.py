"""Every bound lint's follower reaches is a coverage note ("not fully checked: <what>,
<why>"), never a silent pass: each test below reaches one bound of docs/limits.md with a real
Dockerfile and build context and checks the note, and that what was read is still judged.
The report of a file with a note and no finding is "partly checked" in every output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from servelab.findings import FindingsReport
from servelab.lint import LintConfig, lint_paths
from servelab.lint.follow import (
    MAX_LOOP_FILES,
    MAX_MAKE_DEPTH,
    MAX_MAKE_EXPANSION,
    MAX_MAKE_TARGETS,
    MAX_MODULES,
)
from servelab.lint.image import MAX_SCRIPT_BYTES
from servelab.lint.pyfallback import MAX_REPAIR_CHARS, MAX_REPAIRS
from servelab.lint.rules._start import MAX_SCRIPT_DEPTH
from servelab.lint.walk import MAX_GLOB_MATCHES, MAX_LINK_HOPS
from servelab.report import get_reporter

from .conftest import PINNED, REPO

HEAD = f"FROM {PINNED}\n"
TAIL = ("USER 10001\nEXPOSE 8000\n"
        "HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n")
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-2.1.0.schema.json"
LOAD = "from transformers import AutoModel\nM = AutoModel.from_pretrained('org/model')\n"


def _lint(df: Path) -> FindingsReport:
    return lint_paths([df], config=LintConfig(), hadolint=False)


def _notes(report: FindingsReport) -> list[str]:
    return [n.text() for n in report.coverage]


def _has(report: FindingsReport, *words: str) -> bool:
    return any(all(w in t for w in words) for t in _notes(report))


def _startup(report: FindingsReport) -> list[str]:
    return [f.message for f in report.findings if f.rule_id == "startup-download"]


def _df(write, copy: str, cmd: str, files: dict[str, str]) -> Path:  # type: ignore[no-untyped-def]
    return write(f"{HEAD}WORKDIR /srv\nCOPY {copy}\n{TAIL}CMD {cmd}\n", files)


def _app(write, files: dict[str, str], cmd: str = '["uvicorn", "app.main:app"]') -> Path:  # type: ignore[no-untyped-def]
    return write(f"{HEAD}WORKDIR /srv\nCOPY app/ ./app/\n{TAIL}CMD {cmd}\n",
                 {"app/__init__.py": "", **files})


def test_modules_past_the_bound_are_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    n = MAX_MODULES + 4
    files = {f"app/m{i}.py": f"from app import m{i + 1}\n" for i in range(n)}
    files[f"app/m{n}.py"] = LOAD
    report = _lint(_app(write_dockerfile, {"app/main.py": "from app import m0\n", **files}))
    assert _has(report, "not fully checked:", f"past the first {MAX_MODULES}", "MAX_MODULES")
    assert report.verdict() == "partly checked"


def test_make_targets_past_the_bound_are_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    n = MAX_MAKE_TARGETS + 5
    rules = "".join(f"t{i}: t{i + 1}\n\techo {i}\n" for i in range(n))
    make = f"serve: t0\n\tuvicorn app:app\n{rules}t{n}:\n\tpip install torch\n"
    df = _df(write_dockerfile, "Makefile ./", '["make", "serve"]', {"Makefile": make})
    report = _lint(df)
    assert _has(report, f"past its first {MAX_MAKE_TARGETS} targets", "MAX_MAKE_TARGETS")


def _doubling_makefile(levels: int = 24) -> str:
    lines = ["V0 = xxxxxxxxxxxxxxxx"]
    lines += [f"V{i} = $(V{i - 1})$(V{i - 1})$(V{i - 1})$(V{i - 1})" for i in range(1, levels)]
    last = f"V{levels - 1}"
    return "\n".join(lines) + f"\nserve: $({last})\n\techo $({last}) && pip install torch\n"


def test_a_makefile_whose_variables_explode_is_linear_and_said(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    make = _doubling_makefile()
    assert len(make.encode()) < 800  # 4**24 characters if expanded
    df = _df(write_dockerfile, "Makefile ./", '["make", "serve"]', {"Makefile": make})
    start = time.process_time()
    report = _lint(df)
    assert time.process_time() - start < 2.0
    assert _has(report, "the variables of /srv/Makefile", str(MAX_MAKE_EXPANSION),
                "MAX_MAKE_EXPANSION")
    assert any("pip install" in m for m in _startup(report))  # the recipe is still read


def test_make_expansion_past_its_depth_is_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    make = "A = $(B)\nB = $(A)\nserve:\n\techo $(A)\n\tuvicorn app:app\n"
    df = _df(write_dockerfile, "Makefile ./", '["make", "serve"]', {"Makefile": make})
    assert _has(_lint(df), f"{MAX_MAKE_DEPTH} rounds", "MAX_MAKE_DEPTH")


def test_loop_files_past_the_bound_are_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    files = {f"plugins/p{i:03}/install.py": "print('ok')\n" for i in range(MAX_LOOP_FILES + 5)}
    run = 'for f in plugins/*/install.py; do python "$f"; done && uvicorn app:app'
    df = _df(write_dockerfile, "plugins/ ./plugins/", run, files)
    assert _has(_lint(df), f"past the first {MAX_LOOP_FILES}", "MAX_LOOP_FILES")


def test_scripts_past_the_depth_are_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    files = {"s/start.sh": "sh /srv/s/a.sh\n", "s/a.sh": "sh /srv/s/b.sh\n",
             "s/b.sh": "sh /srv/s/c.sh\n", "s/c.sh": "pip install torch\nuvicorn app:app\n"}
    df = _df(write_dockerfile, "s/ ./s/", '["sh", "/srv/s/start.sh"]', files)
    report = _lint(df)
    assert _has(report, "/srv/s/c.sh", f"{MAX_SCRIPT_DEPTH} levels", "MAX_SCRIPT_DEPTH")
    assert report.verdict() == "partly checked"


def test_a_file_past_the_size_cap_is_read_in_part_and_said(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    big = "pip install torch\n" + "# padding\n" * (MAX_SCRIPT_BYTES // 10 + 10)
    df = _df(write_dockerfile, "start.sh ./", '["sh", "start.sh"]', {"start.sh": big})
    report = _lint(df)
    assert _has(report, "/srv/start.sh", f"first {MAX_SCRIPT_BYTES} bytes", "MAX_SCRIPT_BYTES")
    assert any("pip install" in m for m in _startup(report))


def test_nul_bytes_are_a_note_and_the_rest_is_read(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = _df(write_dockerfile, "start.sh ./",
             '["sh", "start.sh"]', {"start.sh": "echo \x00 hidden\npip install torch\n"})
    report = _lint(df)
    assert _has(report, "/srv/start.sh", "NUL bytes")
    assert any("pip install" in m for m in _startup(report))


def test_a_copy_glob_past_the_walk_bound_is_a_note(write_dockerfile, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SERVELAB_MAX_CONTEXT_FILES", "5")
    files = {f"conf/c{i:02}.yaml": "a: 1\n" for i in range(12)}
    df = write_dockerfile(f"{HEAD}WORKDIR /srv\nCOPY conf/*.yaml ./conf/\n{TAIL}"
                          'CMD ["uvicorn", "app:app"]\n', files)
    assert _has(_lint(df), "COPY conf/*.yaml", "SERVELAB_MAX_CONTEXT_FILES")


def test_a_link_loop_in_the_context_is_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = _df(write_dockerfile, "scripts/ ./scripts/", '["sh", "scripts/start.sh"]',
             {"scripts/keep.txt": "x\n"})
    (df.parent / "scripts" / "start.sh").symlink_to("loop.sh")
    (df.parent / "scripts" / "loop.sh").symlink_to("start.sh")
    assert _has(_lint(df), "scripts/start.sh", f"{MAX_LINK_HOPS} symbolic links",
                "MAX_LINK_HOPS")


NEWER = {
    "type": "type Vector = list[float]\n" + LOAD,
    "generics": LOAD + "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
    "class-generics": "class Box[T]:\n    pass\n" + LOAD,
    "fstring": "d = {'k': 'v'}\nname = f\"{d[\"k\"]}\"\n" + LOAD,
    "fstring-on-the-load-line": (
        "from transformers import AutoModel\nd = {'k': 'v'}\n"
        "M = AutoModel.from_pretrained('org/model'); s = f\"{d[\"k\"]}\"\n"),
}


@pytest.mark.parametrize("kind", sorted(NEWER))
def test_python_newer_than_the_parser_is_read_and_said(write_dockerfile, kind: str) -> None:  # type: ignore[no-untyped-def]
    report = _lint(_app(write_dockerfile, {"app/main.py": NEWER[kind]}))
    assert any("org/model" in m and "app/main.py" in m for m in _startup(report)), report.findings
    assert _has(report, "app/main.py", "Python 3.11's parser cannot read it")


def test_python_past_the_repairs_is_read_by_tokens_and_said(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    broken = LOAD + "x = (((\n" * (MAX_REPAIRS + 5)
    report = _lint(_app(write_dockerfile, {"app/main.py": broken}))
    assert any("org/model" in m for m in _startup(report))
    assert _has(report, "app/main.py", "token scan", "MAX_REPAIRS")


def test_a_large_python_file_that_does_not_parse_is_read_by_tokens(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    big = "type X = int\n" + LOAD + "VALUE = 1\n" * (MAX_REPAIR_CHARS // 10 + 10)
    report = _lint(_app(write_dockerfile, {"app/main.py": big}))
    assert any("org/model" in m for m in _startup(report))
    assert _has(report, "app/main.py", "token scan", "MAX_REPAIR_CHARS")


def test_a_long_dotted_line_is_read_by_tokens_in_linear_time(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    # found by fuzzing: a 60 KB line of ``a.a.a...`` (too deep to parse) took over 45 s in
    # the token scan, whose hub-load pattern tried the dotted name from each ``a`` to the end
    chain = "x = " + "a." * 30_000 + "b\n"
    dotted = "M = " + ".".join(f"m{i}" for i in range(25)) + ".from_pretrained('org/deep')\n"
    start = time.perf_counter()
    report = _lint(_app(write_dockerfile, {"app/main.py": LOAD + chain + dotted}))
    took = time.perf_counter() - start
    assert any("org/model" in m for m in _startup(report))
    assert any("org/deep" in m for m in _startup(report))  # a long dotted name still a load
    assert took < 10, f"took {took:.1f} s"


def test_a_copy_glob_past_its_matches_is_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    files = {f"conf/c{i:03}.yaml": "a: 1\n" for i in range(MAX_GLOB_MATCHES + 5)}
    df = write_dockerfile(f"{HEAD}WORKDIR /srv\nCOPY conf/*.yaml ./conf/\n{TAIL}"
                          'CMD ["uvicorn", "app:app"]\n', files)
    assert _has(_lint(df), "COPY conf/*.yaml", "MAX_GLOB_MATCHES")


def test_a_flags_only_cmd_is_the_launchers_never_hosts(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(
        "FROM ghcr.io/huggingface/text-generation-inference:2.4.1@sha256:" + "b" * 64 + "\n"
        + TAIL + 'CMD ["--host", "0.0.0.0", "--model-id", "org/model"]\n')
    [message] = _startup(_lint(df))
    assert "`text-generation-launcher`" in message and "--host" not in message


# -- the verdict in every output ---------------------------------------------------------


@pytest.fixture
def partly(write_dockerfile) -> Path:  # type: ignore[no-untyped-def]
    return _app(write_dockerfile, {"app/main.py": "type X = int\napp = object()\n"})


def test_partly_checked_in_every_output(partly: Path) -> None:
    report = _lint(partly)
    assert not report.findings and report.verdict() == "partly checked"
    text = get_reporter("text").render(report)
    assert "not fully checked: app/main.py" in text
    assert "1 file(s) partly checked, no findings in what was read" in text
    assert "no findings\n" not in text
    doc = json.loads(get_reporter("json").render(report))
    assert doc["verdict"] == "partly checked"
    assert doc["coverage"][0]["what"] == "app/main.py"
    assert doc["coverage"][0]["file"] == str(partly)
    assert "partly checked" in get_reporter("markdown").render(report)
    assert "::warning file=" in get_reporter("github").render(report)
    sarif = json.loads(get_reporter("sarif").render(report))
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    [run] = sarif["runs"]
    [note] = run["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"].startswith("not fully checked: app/main.py")
    assert run["properties"]["verdict"] == "partly checked"


def test_partly_checked_exits_0_and_says_so(partly: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_DEBUG"}
    proc = subprocess.run([sys.executable, "-m", "servelab", "lint", "--no-hadolint",
                           str(partly)], capture_output=True, text=True, env=env,
                          cwd=partly.parent, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "partly checked" in proc.stdout and "not fully checked" in proc.stdout


def test_a_fully_read_file_passes(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    report = _lint(_app(write_dockerfile, {"app/main.py": "app = object()\n"}))
    assert not report.coverage and report.verdict() == "passed"
    assert "checked, no findings" in get_reporter("text").render(report)


# -- RUN --mount=type=bind,from=<stage or image> --------------------------------------------
BIND_FETCH = "wget -O /srv/model.safetensors https://example.com/org/model.safetensors\n"


@pytest.mark.parametrize(
    ("stage", "mount"),
    [
        ("RUN printf 'wget x' > /opt/fetch.sh\n", "from=tools,source=/opt/fetch.sh"),
        ("", "from=registry.example/tools:1,source=/opt/fetch.sh"),
    ],
    ids=["stage-run-made", "image"],
)
def test_a_bind_from_an_unread_source_is_a_note(write_dockerfile, stage: str,  # type: ignore[no-untyped-def]
                                               mount: str) -> None:
    df = write_dockerfile(f"{HEAD.strip()} AS tools\n{stage}{HEAD}"
                          f"RUN --mount=type=bind,{mount},target=/x sh /x\n{TAIL}"
                          'CMD ["python", "-m", "server"]\n')
    report = _lint(df)
    assert _has(report, "/x", "bind-mounts it from", "/opt/fetch.sh", "not judged")
    assert report.coverage[0].line == (4 if stage else 3)  # the RUN's line


def test_a_bind_from_a_stage_copy_is_followed(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD.strip()} AS tools\nCOPY fetch.sh /opt/fetch.sh\n{HEAD}"
                          "RUN --mount=type=bind,from=tools,source=opt/fetch.sh,target=/x "
                          f'sh /x\n{TAIL}CMD ["python", "-m", "server"]\n',
                          {"fetch.sh": BIND_FETCH})
    report = _lint(df)
    assert report.coverage == []
    assert [(f.rule_id, f.line) for f in report.findings] == [("weights-baked", 4)]
