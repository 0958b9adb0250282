"""The shell reader honours quotes before lines (issue 24, kind "commands hidden in a start
script"): a newline inside a quoted string of an ``sh -c "..."`` script, a RUN heredoc, an
exec-form ENTRYPOINT/CMD script, a start script or a k8s launch script must not hide the
commands after it. Before the fix the tokenizer split lines first, so a quoted newline left
the quotes unbalanced and ``curl ... | sh`` or ``pip install`` after it passed with exit 0.

Test ids (docs/limits.md): ``test_quoted_newline_hides_nothing`` (Hypothesis), and the case
tests below, one per place scripts are read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servelab.k8s import check_manifests
from servelab.k8s.script import tokens
from servelab.lint import LintConfig, lint_paths
from servelab.lint.shell import commands

PINNED = (
    "127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
    "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1"
)
PAYLOADS = [
    ("curl -fsSL https://get.example.com/install.sh | sh", "curl"),
    ("pip install vllm", "pip"),
    ("wget -qO- https://get.example.com/i.sh | bash -s -- -y", "wget"),
    ("huggingface-cli download org/model --local-dir /models", "huggingface-cli"),
]
#: text with newlines and the characters that confused the old reader, inside quotes
_QUOTED_BODY = st.text(alphabet=st.sampled_from(list("ab #;|&()$\n'\\")), max_size=20)


def _double(body: str) -> str:
    return '"' + body.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _single(body: str) -> str:
    return "'" + body.replace("'", "") + "'"


@given(body=_QUOTED_BODY, payload=st.sampled_from(PAYLOADS),
       quote=st.sampled_from([_double, _single]), wrap=st.booleans(),
       sep=st.sampled_from(["; ", " && ", "\n", " || true\n"]))
def test_quoted_newline_hides_nothing(body: str, payload: tuple[str, str], quote: object,
                                      wrap: bool, sep: str) -> None:
    text, program = payload
    quoted = quote(body + "\n" + body)  # type: ignore[operator]
    script = f"echo {quoted}{sep}{text}\nexec server --port 8000"
    if wrap:  # the same script handed to sh -c, quoted as an exec-form CMD does
        script = "sh -c " + _double(script)
    names = [c.name for c in commands(script)]
    assert program in names
    assert names[-1] == "server"
    k8s_words = [t for t, _line, op in tokens(script) if not op]
    assert program in k8s_words or wrap


def _lint(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None) -> list[str]:
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    (tmp_path / "Dockerfile").write_text(dockerfile)
    report = lint_paths([tmp_path / "Dockerfile"], config=LintConfig(), hadolint=False)
    return [f"{f.rule_id}@{f.line}" for f in report.findings]


TAIL = "USER 10001\nHEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n"


def test_exec_form_cmd_script(tmp_path: Path) -> None:
    script = 'echo "starting\nthe server"; pip install vllm\nexec vllm serve /models/m --port 8000'
    cmd = json.dumps(["sh", "-c", script])
    found = _lint(tmp_path, f"FROM {PINNED}\n{TAIL}CMD {cmd}\n")
    assert found == ["startup-download@4"]


def test_exec_form_entrypoint_curl_pipe(tmp_path: Path) -> None:
    script = ("set -e; echo 'downloading\n' && curl -fsSL \"https://get.example.com/i.sh\" | sh\n"
              "exec python -m server --port 8000")
    ep = json.dumps(["/bin/bash", "-c", script])
    found = _lint(tmp_path, f"FROM {PINNED}\n{TAIL}ENTRYPOINT {ep}\n")
    assert found == ["startup-download@4"]


def test_run_heredoc_sh_c(tmp_path: Path) -> None:
    df = (f"FROM {PINNED}\nRUN <<EOF\nbash -c \"echo 'one\ntwo' && "
          "curl -fsSL https://get.example.com/install.sh | bash\"\nEOF\n"
          f"{TAIL}CMD [\"python\", \"-m\", \"server\"]\n")
    assert _lint(tmp_path, df) == ["download-unverified@2"]


def test_start_script_in_the_context(tmp_path: Path) -> None:
    start = ('#!/bin/sh\nsh -c "echo \\"warming\nup\\" &&'
             ' pip install --no-cache-dir flash-attn"\nexec python -m server --port 8000\n')
    df = (f"FROM {PINNED}\nCOPY start.sh /start.sh\n{TAIL}"
          'CMD ["/start.sh"]\n')
    assert _lint(tmp_path, df, {"start.sh": start}) == ["startup-download@5"]


def test_k8s_launch_script(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: server\n    image: " + PINNED + "\n"
        '    command: ["/bin/bash", "-c"]\n'
        "    args:\n    - |\n"
        "      echo \"preparing\n      the node\"\n"
        "      bash -c \"echo 'x\n      y'; pip install vllm\"\n"
        "      exec vllm serve /models/m --port 8000\n")
    ids = {f.rule_id for f in check_manifests([pod]).findings}
    assert "start-install" in ids


@given(piece=st.sampled_from(['"$(', "$(", "echo $(a ", "`a ", "${", "'", '"', "\\", "sh -c \""]),
       count=st.integers(min_value=1, max_value=4000))
def test_nested_or_unclosed_groups_end_quickly(piece: str, count: int) -> None:
    """Deep or unclosed ``$(``, quotes and ``sh -c`` nesting: a bounded, linear read with no
    RecursionError (which lint would report as stages chained too deeply)."""
    text = piece * count + " curl -fsSL https://get.example.com/i.sh | sh"
    start = time.perf_counter()
    commands(text)
    tokens(text)
    assert time.perf_counter() - start < 5


def test_heredoc_body_hides_nothing(tmp_path: Path) -> None:
    """A here-document body is not part of the text around it: an apostrophe in it must not
    open a quote that swallows the commands after it; a body a shell reads is a script."""
    df = (f"FROM {PINNED}\n"
          "RUN cat > /etc/motd <<-'TXT' && curl -fsSL https://get.example.com/install.sh | sh\n"
          "\tit's a serving image\n\tTXT\n"
          "RUN bash -e <<'SH'\npip install --no-cache-dir vllm\nSH\n"
          f"{TAIL}CMD [\"python\", \"-m\", \"server\"]\n")
    found = _lint(tmp_path, df)
    assert found == ["download-unverified@2", "unpinned-packages@5"]
    cmds = commands("cat > f <<X\n'\nX\ncurl -fsSL https://x.example/i | sh\n")
    assert [c.name for c in cmds][-2:] == ["curl", "sh"] and cmds[-2].line == 4
