"""The sticky pull-request comment, against a LOOPBACK STAND-IN of GitHub's REST API.

The stand-in below is not GitHub: it is a small HTTP server on 127.0.0.1 that implements the
three issue-comment endpoints the action calls (list with paging, create, update), checks the
token and the API version header, and records every request. The code under test reaches it
through GITHUB_API_URL, as it reaches GitHub Enterprise Server's API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from action_testlib import parse_output_file, summary_json

from servelab import github
from servelab.errors import CapabilityError
from servelab.github import prcomment

TOKEN = "ghs_loopback-test-token"  # noqa: S105 (a test value for the loopback stand-in)
REPO = "acme/model-server"
#: the stand-in serves the API under a path, as GitHub Enterprise Server does (/api/v3)
PREFIX = "/api/v3"


@dataclass
class FakeGitHub:
    """State of the loopback stand-in: the PR's comments and the requests it answered."""

    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    refuse_writes: bool = False
    url: str = ""

    def add(self, body: str, user: str = "someone") -> None:
        n = len(self.comments) + 1
        self.comments.append({"id": 1000 + n, "body": body, "user": {"login": user},
                              "html_url": f"https://github.example/{REPO}/pull/7#c{n}"})


def _handler(state: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def reply(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def allowed(self) -> bool:
            state.requests.append((self.command, self.path))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.reply(401, {"message": "Bad credentials"})
                return False
            if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
                self.reply(400, {"message": "missing API version"})
                return False
            if self.command != "GET" and state.refuse_writes:
                self.reply(403, {"message": "Resource not accessible by integration"})
                return False
            return True

        def body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            data = json.loads(self.rfile.read(length) or b"{}")
            assert isinstance(data, dict)
            return data

        def do_GET(self) -> None:  # list, paged
            if not self.allowed():
                return
            url = urlsplit(self.path)
            if url.path != f"{PREFIX}/repos/{REPO}/issues/7/comments":
                self.reply(404, {"message": "Not Found"})
                return
            q = parse_qs(url.query)
            size, page = int(q["per_page"][0]), int(q["page"][0])
            self.reply(200, state.comments[(page - 1) * size: page * size])

        def do_POST(self) -> None:  # create
            if not self.allowed():
                return
            if self.path != f"{PREFIX}/repos/{REPO}/issues/7/comments":
                self.reply(404, {"message": "Not Found"})
                return
            state.add(self.body()["body"], user="github-actions[bot]")
            self.reply(201, state.comments[-1])

        def do_PATCH(self) -> None:  # update
            if not self.allowed():
                return
            m = re.fullmatch(rf"{PREFIX}/repos/{REPO}/issues/comments/([0-9]+)", self.path)
            found = [c for c in state.comments if m and c["id"] == int(m.group(1))]
            if not found:
                self.reply(404, {"message": "Not Found"})
                return
            found[0]["body"] = self.body()["body"]
            self.reply(200, found[0])

    return Handler


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """The loopback stand-in of GitHub's REST API (not GitHub), on a free port."""
    state = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _event(tmp: Path, head_repo: str = REPO) -> Path:
    path = tmp / "event.json"
    path.write_text(json.dumps({
        "number": 7, "repository": {"full_name": REPO},
        "pull_request": {"number": 7, "head": {"repo": {"full_name": head_repo}},
                         "base": {"repo": {"full_name": REPO}}}}))
    return path


def _results(tmp: Path, verdict: str = "failed") -> Path:
    results = tmp / "results"
    results.mkdir(exist_ok=True)
    (results / "summary.md").write_text(
        f"# servelab: ❌ {verdict}\n\n- crashed (treatment r1): it downloads at start\n\n"
        "## Why\n\n**treatment**: 1 failed check (`download-attempt`)\n\n"
        "## Control vs treatment\n\n| arm | size |\n|---|---|\n| treatment | 1 MiB |\n\n"
        "## Per repeat\n\n| arm | repeat |\n|---|---|\n")
    return results


def _env(fake: FakeGitHub, event: Path) -> dict[str, str]:
    return {"GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": fake.url, "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_RUN_ID": "42"}


def test_the_comment_is_created_then_updated_in_place(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    for i in range(150):  # the PR's other comments span two pages
        fake_github.add(f"review comment {i}")
    env = _env(fake_github, _event(tmp_path))
    first = github.comment_on_pr(_results(tmp_path), key="servelab-experiment", token=TOKEN,
                                 env=env)
    assert first.action == "created" and first.url
    second = github.comment_on_pr(_results(tmp_path, "improved"), key="servelab-experiment",
                                  token=TOKEN, env=env)
    assert second.action == "updated" and second.url == first.url
    ours = [c for c in fake_github.comments if prcomment.marker("servelab-experiment") in c["body"]]
    assert len(ours) == 1 and len(fake_github.comments) == 151
    body = ours[0]["body"]
    assert body.startswith("# servelab: ❌ improved") and "## Why" in body
    assert "| treatment | 1 MiB |" in body and "## Per repeat" not in body
    assert "[The workflow run](https://github.example/acme/model-server/actions/runs/42)" in body
    methods = [m for m, _ in fake_github.requests]
    assert methods.count("POST") == 1 and methods.count("PATCH") == 1
    assert ("GET", f"{PREFIX}/repos/{REPO}/issues/7/comments?per_page=100&page=2") in \
        fake_github.requests


def test_each_job_and_matrix_leg_has_its_own_comment(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    env = _env(fake_github, _event(tmp_path))
    for key in ("servelab-experiment-ubuntu-24.04-1", "servelab-experiment-ubuntu-22.04-1"):
        assert github.comment_on_pr(_results(tmp_path), key=key, token=TOKEN,
                                    env=env).action == "created"
    assert len(fake_github.comments) == 2


def test_no_comment_on_a_forks_pull_request(tmp_path: Path, fake_github: FakeGitHub) -> None:
    env = _env(fake_github, _event(tmp_path, head_repo="someone/model-server"))
    got = github.comment_on_pr(_results(tmp_path), key="k", token=TOKEN, env=env)
    assert got.action == "skipped" and "fork someone/model-server" in got.reason
    assert fake_github.requests == []


def test_no_comment_outside_a_pull_request(tmp_path: Path, fake_github: FakeGitHub) -> None:
    event = tmp_path / "push.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "repository": {"full_name": REPO}}))
    got = github.comment_on_pr(_results(tmp_path), key="k", token=TOKEN,
                               env=_env(fake_github, event))
    assert got.action == "skipped" and fake_github.requests == []


def test_a_token_without_write_access_is_explained(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.refuse_writes = True
    with pytest.raises(CapabilityError) as e:
        github.comment_on_pr(_results(tmp_path), key="k", token=TOKEN,
                             env=_env(fake_github, _event(tmp_path)))
    assert "HTTP 403 (Resource not accessible by integration)" in e.value.message
    assert e.value.hint and "pull-requests: write" in e.value.hint


def test_a_long_summary_is_cut_to_githubs_comment_limit(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.md").write_text("# servelab: ✅ improved\n\n" + "| row | ✓ |\n" * 20_000)
    github.comment_on_pr(results, key="k", token=TOKEN, env=_env(fake_github, _event(tmp_path)))
    body = fake_github.comments[0]["body"]
    assert len(body) <= 65536 and body.rstrip().endswith(prcomment.marker("k"))
    assert "Summary truncated" in body


def test_the_hidden_command_comments_and_never_fails_the_step(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    results = _results(tmp_path)
    (results / "summary.json").write_text(summary_json(verdict="failed", arms=[]))
    env = {**os.environ, **_env(fake_github, _event(tmp_path)), "GITHUB_TOKEN": TOKEN,
           "GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_JOB": "experiment"}
    cmd = [sys.executable, "-m", "servelab", "action-outputs", f"--results-dir={results}",
           "--prefix=servelab", "--job=experiment", "--pr-comment=TRUE", "--leg="]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("::notice title=servelab::PR comment created")
    assert prcomment.marker("servelab-experiment") in fake_github.comments[0]["body"]
    assert parse_output_file((tmp_path / "out").read_text())["verdict"] == "failed"
    fake_github.refuse_writes = True
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0  # a comment that cannot be written is a warning
    assert proc.stdout.startswith("::warning title=servelab%3A no PR comment::PATCH ")


def test_the_token_never_reaches_the_command_line_or_the_log(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.refuse_writes = True
    results = _results(tmp_path)
    env = {**os.environ, **_env(fake_github, _event(tmp_path)), "GITHUB_TOKEN": TOKEN,
           "GITHUB_OUTPUT": str(tmp_path / "out")}
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "action-outputs", f"--results-dir={results}",
         "--pr-comment=true"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert TOKEN not in proc.stdout + proc.stderr
    assert TOKEN not in (tmp_path / "out").read_text()
