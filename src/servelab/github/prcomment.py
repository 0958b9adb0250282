"""The sticky pull-request comment: the verdict table on the PR, updated in place on each push.

The composite action's ``pr-comment`` input (off by default) has the publishing step call
:func:`post_sticky_comment`. It uses GitHub's REST API for issue comments (a pull request is
an issue) with the job's token:

* ``GET /repos/{owner}/{repo}/issues/{number}/comments`` (paged, 100 a page) to find the
  comment that carries this job's hidden marker ``<!-- servelab:pr-comment:<key> -->``;
* ``PATCH /repos/{owner}/{repo}/issues/comments/{id}`` to update it, or
  ``POST /repos/{owner}/{repo}/issues/{number}/comments`` to create it.

The key is the job's artifact name stem (prefix, job id, matrix leg), so each job and matrix
leg keeps its own comment. Nothing is posted for an event that is not a pull request, nor for
a pull request from a fork (its token is read-only, and a fork's code must not get a writing
token); :class:`CommentOutcome` says which and why. The API base is ``GITHUB_API_URL`` (GitHub
Enterprise Server has its own), so a test can point it at a loopback stand-in.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.errors import CapabilityError, InputError, UsageError
from servelab.textio import JSON_BYTES, read_text

#: GitHub refuses a comment body longer than 65536 characters
BODY_LIMIT = 60_000
PAGE_SIZE = 100
MAX_PAGES = 30
TIMEOUT_S = 30.0
API_VERSION = "2022-11-28"


@dataclass(frozen=True)
class PullRequest:
    """The pull request a workflow run is about, from its event payload."""

    repository: str  # owner/name of the base repository
    number: int
    head_repository: str | None

    @property
    def from_fork(self) -> bool:
        return self.head_repository is not None and self.head_repository != self.repository


@dataclass(frozen=True)
class CommentOutcome:
    """What happened: ``created``, ``updated`` or ``skipped`` (with why), and the comment URL."""

    action: str
    reason: str = ""
    url: str | None = None


def marker(key: str) -> str:
    """The hidden line that identifies this job's comment among the PR's comments."""
    return f"<!-- servelab:pr-comment:{key} -->"


def pull_request(event: Mapping[str, Any], repository: str) -> PullRequest | None:
    """The pull request of a ``pull_request`` event payload, None for other events."""
    pr = event.get("pull_request")
    if not isinstance(pr, Mapping):
        return None
    number = pr.get("number", event.get("number"))
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        return None
    head = pr.get("head") if isinstance(pr.get("head"), Mapping) else {}
    head_repo = head.get("repo") if isinstance(head, Mapping) else None
    name = head_repo.get("full_name") if isinstance(head_repo, Mapping) else None
    base = event.get("repository")
    base_name = base.get("full_name") if isinstance(base, Mapping) else None
    return PullRequest(repository=str(repository or base_name or ""), number=number,
                       head_repository=str(name) if name else None)


def load_event(path: Path) -> dict[str, Any]:
    """The event payload at GITHUB_EVENT_PATH."""
    from servelab.textio import read_json

    data = read_json(path, what="GitHub event payload")
    if not isinstance(data, dict):
        raise InputError("the event payload is not a JSON object", file=str(path))
    return data


def comment_body(markdown: str, key: str, run_url: str | None) -> str:
    """The comment: *markdown* (cut to fit, its ``@mentions`` and ``#123`` references
    neutralised: names from the PR must not notify people or link issues), a link to the run,
    and the marker."""
    from servelab.escape import no_mentions
    from servelab.run.summary import truncate_markdown

    markdown = no_mentions(markdown)
    foot = f"\n\n[The workflow run]({run_url}): full summary and artifacts.\n" if run_url else ""
    room = BODY_LIMIT - len((foot + marker(key)).encode("utf-8")) - 2
    text = truncate_markdown(markdown, room, "the full summary is in the workflow run")
    return f"{text.rstrip()}{foot}\n{marker(key)}\n"


class GitHubApi:
    """The few REST calls the sticky comment needs, with the job's token."""

    def __init__(self, api_url: str, token: str, *, timeout: float = TIMEOUT_S) -> None:
        if not token:
            raise UsageError("no token for GitHub's API",
                             hint="pass github-token (the default is the job's GITHUB_TOKEN)")
        parsed = urllib.parse.urlsplit(api_url)
        if parsed.scheme not in ("https", "http") or not parsed.netloc:
            raise UsageError(f"GITHUB_API_URL {api_url!r} is not an http(s) URL")
        self.base = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(  # noqa: S310 (scheme checked above)
            self.base + path, data=data, method=method,
            headers={"Authorization": f"Bearer {self.token}",
                     "Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": API_VERSION, "User-Agent": "servelab",
                     **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _http_error(method, path, e) from e
        except (urllib.error.URLError, OSError) as e:
            raise CapabilityError(f"GitHub's API at {self.base} cannot be reached: {e}",
                                  hint="check GITHUB_API_URL and the runner's network") from e
        try:
            return json.loads(raw) if raw else None
        except ValueError as e:
            raise CapabilityError(f"{method} {path}: the answer is not JSON") from e

    def find_comment(self, pr: PullRequest, mark: str) -> Mapping[str, Any] | None:
        for page in range(1, MAX_PAGES + 1):
            got = self.call("GET", f"/repos/{pr.repository}/issues/{pr.number}/comments"
                            f"?per_page={PAGE_SIZE}&page={page}")
            items = got if isinstance(got, list) else []
            for c in items:
                if isinstance(c, Mapping) and mark in str(c.get("body") or ""):
                    return c
            if len(items) < PAGE_SIZE:
                return None
        return None


def _http_error(method: str, path: str, e: urllib.error.HTTPError) -> CapabilityError:
    detail = ""
    try:
        detail = str(json.loads(e.read() or b"{}").get("message") or "")
    except (ValueError, AttributeError, OSError):
        detail = ""
    hints = {
        401: "the token was refused: pass a valid github-token",
        403: "give the job `permissions: pull-requests: write` (a fork's token is read-only)",
        404: "the repository or pull request is not visible to this token",
    }
    return CapabilityError(f"{method} {path}: HTTP {e.code}" + (f" ({detail})" if detail else ""),
                           hint=hints.get(e.code, "see GitHub's status and retry"))


def post_sticky_comment(api: GitHubApi, pr: PullRequest, key: str,
                        body: str) -> CommentOutcome:
    """Create this job's comment on *pr*, or update it in place; never on a fork's PR."""
    if pr.from_fork:
        return CommentOutcome("skipped", f"pull request #{pr.number} comes from the fork "
                              f"{pr.head_repository}: no comment (its token is read-only)")
    found = api.find_comment(pr, marker(key))
    if found is not None and isinstance(found.get("id"), int):
        got = api.call("PATCH", f"/repos/{pr.repository}/issues/comments/{found['id']}",
                       {"body": body})
        action = "updated"
    else:
        got = api.call("POST", f"/repos/{pr.repository}/issues/{pr.number}/comments",
                       {"body": body})
        action = "created"
    url = got.get("html_url") if isinstance(got, Mapping) else None
    return CommentOutcome(action, url=str(url) if url else None)


def comment_on_pr(
    results_dir: Path,
    *,
    key: str,
    token: str,
    env: Mapping[str, str] | None = None,
) -> CommentOutcome:
    """The sticky PR comment (:mod:`servelab.github.prcomment`) with the run's summary.md up to its
    per-repeat table: the verdict, why, and the control-vs-treatment table. Skipped outside a
    pull request and on a fork's."""
    e = os.environ if env is None else env
    event_path = e.get("GITHUB_EVENT_PATH")
    pr = pull_request(load_event(Path(event_path)), e.get("GITHUB_REPOSITORY", "")) \
        if event_path else None
    if pr is None:
        return CommentOutcome("skipped", "not a pull_request event: no PR to comment on")
    if pr.from_fork:
        return CommentOutcome("skipped", f"pull request #{pr.number} comes from the fork "
                              f"{pr.head_repository}: no comment (its token is read-only)")
    md_path = results_dir / "summary.md"
    md = read_text(md_path, max_bytes=JSON_BYTES, what="summary.md") if md_path.is_file() else \
        "# servelab: no summary\n\nservelab run wrote no summary.md; see the workflow run.\n"
    head = md.split("\n## Per repeat", 1)[0]
    server, repo, run_id = (e.get("GITHUB_SERVER_URL"), e.get("GITHUB_REPOSITORY"),
                            e.get("GITHUB_RUN_ID"))
    run_url = f"{server}/{repo}/actions/runs/{run_id}" if server and repo and run_id else None
    api = GitHubApi(e.get("GITHUB_API_URL") or "https://api.github.com", token)
    return post_sticky_comment(api, pr, key, comment_body(head, key, run_url))
