"""Deadlines and bounded work (issue 24). An engine or registry that accepts a connection and
never answers held doctor 50 s, diff and pin 30 s, push and smoke longer; a backtracking
--expect-regex had no time limit; ``--model /`` hashed the whole host. Each case here runs
against a loopback server made by the test (127.0.0.1 only), with the deadline made small
through its documented environment variable.

Test ids named in docs/limits.md: hostile-same-silent-server, hostile-same-dribble,
hostile-same-stalled-push, hostile-same-bad-deadline, hostile-same-regex,
hostile-same-model-tree."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostile.harness import run_servelab
from ocitest import E, archive, tar_bytes, write_layout
from servelab.errors import CapabilityError, InputError
from servelab.hashing import sha256_tree
from servelab.image.push import TestedImage, push_tested
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.smoke.model import digest_path
from servelab.smoke.result import check_response, regex_search
from servelab.spec import Request

from .servers import dribbling_server, silent_server, stalling_registry

#: what a case may take: the 1 s deadline, Python's start and the tool's own (2 cores, shared)
LIMIT_S = 9.0
FAST = {"SERVELAB_REGISTRY_TIMEOUT": "1", "SERVELAB_ENGINE_TIMEOUT": "1"}

#: (id, argv with {port}, environment with {port}, words stderr or stdout must hold)
SILENT_CASES = [
    ("diff", ["diff", "127.0.0.1:{port}/team/a:1", "127.0.0.1:{port}/team/b:1"], {},
     "SERVELAB_REGISTRY_TIMEOUT"),
    ("pin", ["pin", "Dockerfile"], {}, "SERVELAB_REGISTRY_TIMEOUT"),
    ("doctor", ["doctor"], {"DOCKER_HOST": "tcp://127.0.0.1:{port}"}, "docker engine"),
    ("smoke", ["smoke", "servelab-none:1"], {"DOCKER_HOST": "tcp://127.0.0.1:{port}"},
     "SERVELAB_ENGINE_TIMEOUT"),
    # before: 60 s each, then "not in the engine" (diff went on to ask Docker Hub)
    ("diff-engine", ["diff", "servelab-none-a:1", "servelab-none-b:1"],
     {"DOCKER_HOST": "tcp://127.0.0.1:{port}"}, "SERVELAB_ENGINE_TIMEOUT"),
    ("scan-engine", ["scan", "servelab-none:1", "--offline"],
     {"DOCKER_HOST": "tcp://127.0.0.1:{port}"}, "SERVELAB_ENGINE_TIMEOUT"),
]


@pytest.mark.parametrize(("argv", "env", "words"), [c[1:] for c in SILENT_CASES],
                         ids=[c[0] for c in SILENT_CASES])
def test_hostile_same_silent_server(tmp_path: Path, argv: list[str], env: dict[str, str],
                                    words: str) -> None:
    with silent_server() as port:
        (tmp_path / "Dockerfile").write_text(f"FROM 127.0.0.1:{port}/team/base:1\nRUN true\n")
        out = run_servelab([a.format(port=port) for a in argv], cwd=tmp_path,
                           env={**FAST, **{k: v.format(port=port) for k, v in env.items()}})
    assert out.code == 3 and not out.killed, out.explain()
    assert out.seconds < LIMIT_S, out.explain()
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert words in out.stderr + out.stdout, out.explain()


def test_hostile_same_dribble(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that sends its manifest a byte every 0.2 s: each socket read is served in
    time, the whole answer is not; the deadline is the request's, not one read's."""
    monkeypatch.setenv("SERVELAB_REGISTRY_TIMEOUT", "1")
    with dribbling_server() as port:
        started = time.monotonic()
        with pytest.raises(CapabilityError, match="did not answer within 1 s"):
            RegistryClient().get_manifest(ImageRef.parse(f"127.0.0.1:{port}/team/app:v1"))
    assert time.monotonic() - started < 3


@pytest.fixture
def tested(tmp_path: Path) -> TestedImage:
    layout = tmp_path / "layout"
    digest = write_layout(layout, [tar_bytes([E("srv/model.txt", b"weights " * 64)])])
    return TestedImage("treatment", digest, archive(layout, tmp_path / "image.oci.tar"), 1)


def test_hostile_same_stalled_push(monkeypatch: pytest.MonkeyPatch, tested: TestedImage) -> None:
    """The registry takes the blob and never answers: the push stops after the no-progress
    deadline (SERVELAB_STALL_TIMEOUT), not after the whole transfer's worth of time."""
    monkeypatch.setenv("SERVELAB_STALL_TIMEOUT", "1")
    with stalling_registry() as port:
        started = time.monotonic()
        with pytest.raises(CapabilityError, match="SERVELAB_STALL_TIMEOUT"):
            push_tested(tested, f"127.0.0.1:{port}/team/app:v1")
    assert time.monotonic() - started < 4


def test_a_silent_registry_stops_a_push_at_its_deadline(monkeypatch: pytest.MonkeyPatch,
                                                         tested: TestedImage) -> None:
    monkeypatch.setenv("SERVELAB_REGISTRY_TIMEOUT", "1")
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(CapabilityError, match="SERVELAB_REGISTRY_TIMEOUT"):
            push_tested(tested, f"127.0.0.1:{port}/team/app:v1")
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e9", "nan"])
def test_hostile_same_bad_deadline(tmp_path: Path, value: str) -> None:
    out = run_servelab(["diff", "127.0.0.1:9/team/a:1", "127.0.0.1:9/team/b:1"], cwd=tmp_path,
                       env={"SERVELAB_REGISTRY_TIMEOUT": value})
    assert out.code == 2 and not out.problems(), out.explain()
    assert "SERVELAB_REGISTRY_TIMEOUT" in out.stderr


#: (pattern, body, matches): catastrophic backtracking on the first three
REGEX_CASES = [
    ("(a+)+$", "a" * 40 + "!", None),
    ("^(\\w+\\s?)*$", "word " * 12 + "!", None),
    ("(x|x)*y", "x" * 40, None),
    ('"status":\\s*"ok"', '{"status": "ok"}', True),
    ("ready", "not yet", False),
]


@pytest.mark.parametrize(("pattern", "body", "want"), REGEX_CASES)
def test_hostile_same_regex(monkeypatch: pytest.MonkeyPatch, pattern: str, body: str,
                            want: bool | None) -> None:
    monkeypatch.setenv("SERVELAB_REGEX_TIMEOUT", "1")
    regex_search.cache_clear()
    started = time.monotonic()
    assert regex_search(pattern, body) is want
    req = Request(path="/v1/chat", expect_status=200, expect_regex=pattern)
    reason = check_response(req, 200, body.encode())
    assert time.monotonic() - started < 5
    if want is None:
        assert reason and "SERVELAB_REGEX_TIMEOUT" in reason  # a failed check, never a pass
    assert (reason is None) is (want is True)


@settings(max_examples=25, deadline=None)
@given(st.from_regex(r"[a-z.*+?|()\[\]^$]{1,12}", fullmatch=True), st.text(max_size=60))
def test_regex_search_agrees_with_re(pattern: str, text: str) -> None:
    """On patterns that finish, the bounded search says what ``re.search`` says."""
    import re

    try:
        want = re.search(pattern, text) is not None
    except re.error:
        return
    assert regex_search(pattern, text) is want


def _tree(root: Path, n: int, size: int = 16) -> Path:
    for i in range(n):
        p = root / f"shard-{i // 10}" / f"part-{i}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(hashlib.sha256(str(i).encode()).digest()[:1] * size)
    return root


@pytest.mark.parametrize(("env", "words"), [
    ({"SERVELAB_MAX_MODEL_FILES": "10"}, "SERVELAB_MAX_MODEL_FILES"),
    ({"SERVELAB_MAX_MODEL_BYTES": "100"}, "SERVELAB_MAX_MODEL_BYTES"),
    ({}, None),
])
def test_hostile_same_model_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 env: dict[str, str], words: str | None) -> None:
    """30 files of 16 bytes in 3 directories: over a cap of 10 entries or 100 bytes."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    n = 30
    root = _tree(tmp_path / "model", n)
    if words is None:
        sha, files = digest_path(root)
        assert sha == sha256_tree(root) and len(files) == n
        return
    with pytest.raises(InputError, match=words) as e:
        digest_path(root)
    assert e.value.exit_code == 2


def test_model_root_of_the_host_is_refused_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model /``: stopped by the entry cap while listing, before any file is read."""
    monkeypatch.setenv("SERVELAB_MAX_MODEL_FILES", "2000")
    started = time.monotonic()
    with pytest.raises(InputError, match="more than 2000 files and directories"):
        digest_path(Path("/"))
    assert time.monotonic() - started < 5
