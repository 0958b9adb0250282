"""Where a download command saves what it fetches: curl, wget, aria2c and the catalogue's
cloud copies (``gsutil cp``, ``aws s3 cp``), their URLs and output files as written.

Shared by :mod:`servelab.lint.fetch` (unverified downloads) and
:mod:`servelab.lint.downloads` (weights unpacked into a model folder); it builds on neither.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from servelab.lint import catalogue
from servelab.lint.lazyre import LazyPattern
from servelab.lint.shell import SimpleCommand, options_and_operands

#: substitutes variables in one word (as written where a value is unknown)
Expand = Callable[[str], str]

#: scheme, user info and host of an http(s) or ftp URL
URL = LazyPattern(r"^(https?|ftp)://([^/:@]+@)?(\[[^\]]+\]|[^/:]+)", re.I)


def urls(argv: list[str]) -> list[str]:
    """The words of *argv* that are URLs."""
    return [a for a in argv if URL.match(a)]


CURL_WITH_VALUE = frozenset({
    "-o", "--output", "-H", "--header", "-u", "--user", "-d", "--data", "-X", "--request",
    "-A", "--user-agent", "-e", "--referer", "--retry", "--retry-delay", "--retry-max-time",
    "-m", "--max-time", "--connect-timeout", "-w", "--write-out", "-x", "--proxy",
    "--proto", "--output-dir", "-T", "--upload-file", "-b", "--cookie", "-c",
    "--cookie-jar", "-K", "--config", "--cacert", "--cert", "--key", "-F", "--form",
    "--data-binary", "--data-raw", "--data-urlencode", "-r", "--range", "-z",
})
WGET_WITH_VALUE = frozenset({
    "-O", "--output-document", "-P", "--directory-prefix", "-o", "--output-file", "-a",
    "--append-output", "-t", "--tries", "-T", "--timeout", "--header", "-U",
    "--user-agent", "--user", "--password", "-e", "--execute", "--ca-certificate",
})


ARIA2_WITH_VALUE = frozenset({
    "-o", "--out", "-d", "--dir", "-x", "--max-connection-per-server", "-s", "--split",
    "-k", "--min-split-size", "-j", "--max-concurrent-downloads", "--header", "-U",
    "--user-agent", "-i", "--input-file", "-t", "--timeout", "-m", "--max-tries",
    "--checksum", "--log", "-l", "--console-log-level", "--summary-interval",
})


def remote_name(url: str) -> str:
    return posixpath.basename(url.split("?", 1)[0])


def curl_output(argv: list[str]) -> Callable[[str], str | None]:
    """Where curl saves a URL: ``-o FILE`` / ``-O`` (remote name), None for stdout. One pass
    over *argv* for all its URLs (a command of thousands of URLs is linear, not quadratic)."""
    out: str | None = None
    remote = False
    for i, a in enumerate(argv[1:], start=1):
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in {"-o", "--output"}:
            out, remote = nxt, False
        elif a.startswith("--output="):
            out, remote = a.partition("=")[2], False
        elif a in {"-O", "--remote-name"} or (a.startswith("-") and not a.startswith("--")
                                                and "O" in a[1:]):
            remote = True
        elif a.startswith("-") and not a.startswith("--") and a.endswith("o") and len(a) > 2:
            out, remote = nxt, False
    return remote_name if remote else lambda url: out


def wget_output(argv: list[str]) -> Callable[[str], str | None]:
    """Where wget saves a URL: ``-O FILE`` (``-qO-``: stdout, None), else the remote name,
    under each ``-P DIR``. One pass over *argv* for all its URLs."""
    out: str | None = None  # None: the remote name
    prefix = ""  # the -P directories given since (posixpath.join is associative)
    for i, a in enumerate(argv[1:], start=1):
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a.startswith("--output-document"):
            out, prefix = a.partition("=")[2] or nxt, ""
        elif a.startswith("-") and not a.startswith("--") and "O" in a:
            out, prefix = a[a.index("O") + 1:] or nxt, ""
        elif a in {"-P", "--directory-prefix"}:
            prefix = posixpath.join(nxt, prefix)

    def where(url: str) -> str | None:
        name = remote_name(url) if out is None else out
        path = posixpath.join(prefix, name) if prefix else name
        return None if path in {"-", "/dev/stdout"} else path

    return where


def aria2_output(argv: list[str]) -> Callable[[str], str]:
    """Where aria2c saves a URL: ``-d DIR`` joined with ``-o NAME`` (else the remote name).
    One pass over *argv* for all its URLs."""
    name: str | None = None  # None: the remote name
    folder = ""
    for i, a in enumerate(argv[1:], start=1):
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        opt, eq, value = a.partition("=")
        if opt in {"-o", "--out"}:
            name = value if eq else nxt
        elif opt in {"-d", "--dir"}:
            folder = value if eq else nxt

    def where(url: str) -> str:
        file = remote_name(url) if name is None else name
        return posixpath.join(folder, file) if folder else file

    return where


def fetched(cmd: SimpleCommand, exp: Expand) -> list[tuple[str, str | None]]:
    """(url, output file or None for stdout) of a curl/wget/aria2c command."""
    argv = [exp(a) for a in cmd.argv]
    if cmd.name == "curl":
        _o, operands = options_and_operands(argv[1:], CURL_WITH_VALUE)
        saved = curl_output(argv)
        return [(u, saved(u) or exp(cmd.stdout) or None) for u in urls(operands)]
    if cmd.name == "wget":
        _o, operands = options_and_operands(argv[1:], WGET_WITH_VALUE)
        saved = wget_output(argv)
        return [(u, saved(u) or exp(cmd.stdout) or None) for u in urls(operands)]
    if cmd.name == "aria2c":
        _o, operands = options_and_operands(argv[1:], ARIA2_WITH_VALUE)
        saved_to = aria2_output(argv)
        return [(u, saved_to(u)) for u in urls(operands)]
    found = catalogue.command_form(argv)
    if found is not None and catalogue.is_cloud_copy(found[1]):
        copy = catalogue.cloud_copy_source(argv, found[1])
        if copy is not None and "$" not in copy[0]:  # gsutil cp gs://b/install.sh /tmp/
            src, dest = copy
            name = posixpath.basename(src.rstrip("/*"))
            into = dest.endswith("/") or "." not in posixpath.basename(dest)
            return [(src, posixpath.join(dest, name) if into else dest)]
    return []


def saved(cmd: SimpleCommand) -> list[tuple[str, str | None]]:
    """(url, the file it is saved to or None for stdout) of a download command, its words
    as written."""
    return fetched(cmd, lambda word: word)
