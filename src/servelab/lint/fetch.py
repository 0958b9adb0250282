"""Downloads in build steps that run or install what nobody verified.

Judged on the simple commands of one RUN (heredoc bodies included), and across RUNs:

* a download piped into an interpreter (``curl ... | sh``, ``wget -O- ... | python3``,
  ``curl ... | VAR=x $PY -``, ``sh -c "$(curl ...)"``, ``bash <(curl ...)``);
* a download of an installer, archive or program (``get-pip.py``, ``*.sh``, ``*.run``,
  ``*.tar.gz``, ``*.zip``, ``*.deb``, a file saved into a ``bin/`` directory or made
  executable) in a RUN that verifies nothing (:func:`verifies`: a digest or key written in
  the Dockerfile or the context; mentioning gpg is no check);
* ``pip install`` of a URL without a hash, or of ``git+`` not at a 40-hex commit
  (:func:`pip_unverified`);
* (:class:`Flow`) a ``git clone`` of a branch that a later command builds or installs, and
  a downloaded file that a later command runs, installs or unpacks, in the same RUN, a later
  one, or a stage that copies it with ``COPY --from``.

URLs and refs are judged after substituting ARG/ENV values and the RUN's own shell
assignments (``PROTOC_ZIP=protoc.zip && curl -OL .../$PROTOC_ZIP``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from servelab.lint import unpack
from servelab.lint.downloads import (
    ARCHIVES,
    HUB_URL,
    is_loopback,
    is_weight_path,
    url_host,
)
from servelab.lint.lazyre import LazyPattern
from servelab.lint.saves import fetched as _fetched
from servelab.lint.saves import (
    urls,
)
from servelab.lint.shell import (
    SimpleCommand,
    assignments,
    commands,
    options_and_operands,
    shown,
)
from servelab.lint.words import expand

#: substitutes variables in one word (as written where a value is unknown)
Expand = Callable[[str], str]

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_INTERPRETER = LazyPattern(r"^(python[\d.]*|perl|ruby|node|php)$")
#: tools that compute a file's digest
_HASH_TOOL = LazyPattern(r"^(sha(1|224|256|384|512)sum|shasum|b2sum|md5sum|rhash)$")
#: a digest or key fingerprint written out: 32 to 128 hex digits
_DIGEST = LazyPattern(r"(?<![0-9A-Za-z])(0x)?[0-9a-fA-F]{32,128}(?![0-9A-Za-z])")
#: an OpenPGP v4 fingerprint as gpg prints it: ten groups of four hex digits, spaced
_SPACED_FPR = LazyPattern(r"(?<![0-9A-Za-z])([0-9A-Fa-f]{4} {1,2}){9}[0-9A-Fa-f]{4}(?![0-9A-Za-z])")
#: a variable that holds a digest or a key (``$SCCACHE_SHA256``, ``${GPG_KEY}``)
_DIGEST_VAR = LazyPattern(
    r"\$\{?([A-Za-z_]*(SHA|SUM|HASH|DIGEST|FINGERPRINT|GPG|KEY)[A-Za-z0-9_]*)",
                          re.I)
#: downloads that are themselves checksums or signatures (fetched beside the file they check)
_CHECK_FILE = LazyPattern(r"(\.(sha(1|256|512)(sum)?|md5|asc|sig|sign|minisig)|sums?(\.txt)?)$",
                          re.I)
_SIGNERS = frozenset({"cosign", "minisign", "signify", "slsa-verifier"})
_INSTALLER = (".sh", ".bash", ".run", ".py", ".pl", ".deb", ".rpm", ".whl", ".jar",
              ".appimage", ".bin", ".apk")
_BIN_DIR = LazyPattern(r"(^|/)s?bin/[^/]+$")
_FED_TO_SHELL = LazyPattern(
    r"\b(?:ba|da|z|k)?sh\s+(?:-\w+\s+)*(?:-c\s+[\"']?\$\(|<\()\s*(curl|wget)\b([^)]*)\)"
)
class Unverified(NamedTuple):
    """One download that is run or installed unchecked: what it is, its line in the text."""

    what: str
    line: int
    url: str = ""


def expander(lookup: Callable[[str], str | None], text: str, escape: str = "\\") -> Expand:
    """Substitute ARG/ENV values (*lookup*) and *text*'s own shell assignments in a word."""
    local = assignments(text)

    def value(name: str, depth: int = 0) -> str | None:
        if name not in local or depth > 3:
            return lookup(name)
        # X=${X} (passing a build ARG on to a script) reads the ARG, not itself
        inner = expand(local[name], lambda n: lookup(n) if n == name else value(n, depth + 1),
                       escape)
        return None if inner.unresolved else inner.value

    def run(word: str) -> str:
        if "$" not in word:
            return word
        out = expand(word, value, escape)
        if not out.unresolved:
            return out.value
        # a loop's variable left as written, the rest known: ``${base_url}/s6-${pkg}.tar.xz``
        return expand_known(word, value)

    return run


_VAR = LazyPattern(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def expand_known(text: str, lookup: Callable[[str], str | None]) -> str:
    """*text* with the ``$NAME``/``${NAME}`` whose value *lookup* knows substituted; the
    others stay as written."""

    def sub(m: re.Match[str]) -> str:
        value = lookup(m.group(1))
        return m.group(0) if value is None else value

    return _VAR.sub(sub, text)


# -- downloads ----------------------------------------------------------------------------


def _reads_stdin(cmd: SimpleCommand, exp: Expand) -> str | None:
    """The interpreter *cmd* is when it runs the script it reads on stdin (as shown in a
    message: ``python3``, ``${PY}``), else None. The program may be held in a variable
    (``curl ... | PIP_ROOT_USER_ACTION=ignore $PY -``): its value decides, and an unknown
    value counts when the command reads ``-``."""
    name = re.sub(r"\$\{?\w+\}?$", "", cmd.name)  # python${PYTHON_VERSION}
    opts, operands = options_and_operands(cmd.argv[1:], frozenset())
    held = _VAR.compiled.fullmatch(cmd.argv[0]) is not None
    if held:
        value = exp(cmd.argv[0]).rsplit("/", 1)[-1]
        if "$" in value and operands[:1] != ["-"]:
            return None  # an unknown program counts only when it reads `-`
        name = "" if "$" in value else value
    if name and name not in _SHELLS and not _INTERPRETER.match(name):
        return None
    if any(o in {"-c", "-e", "-m"} or (o.startswith("-") and not o.startswith("--")
                                       and name in _SHELLS and "c" in o[1:]) for o in opts):
        return None
    if not operands or operands[0] in {"-", "--"} or "-s" in opts:
        return shown(cmd.argv[0]) if held else cmd.name
    return None


def _kind(url: str, out: str | None, made_executable: set[str]) -> str | None:
    """What an unverified download to a file is (installer, archive, program), or None."""
    if is_loopback(url) or is_weight_path(url) or HUB_URL.search(url):
        return None
    name = posixpath.basename((out or url).split("?", 1)[0]).lower()
    if name.endswith(ARCHIVES):
        return "an archive"
    if name.endswith(_INSTALLER):
        return "an installer"
    if out and (_BIN_DIR.search(out) or posixpath.basename(out) in made_executable):
        return "a program"
    return None


def _executables(cmds: list[SimpleCommand]) -> set[str]:
    """Base names of files a ``chmod +x`` (or 7xx) in the commands makes executable."""
    out: set[str] = set()
    for c in cmds:
        if c.name == "chmod" and len(c.argv) >= 3 and re.search(r"x|^[0-7]?7[0-7]{2}$",
                                                                 c.argv[1]):
            out.update(posixpath.basename(a) for a in c.argv[2:] if not a.startswith("-"))
    return out


def _piped_into_interpreter(cmds: list[SimpleCommand], i: int, exp: Expand) -> str | None:
    j = i
    while cmds[j].piped and j + 1 < len(cmds):
        j += 1
        found = _reads_stdin(cmds[j], exp)
        if found:
            return found
    return None


# -- verification ------------------------------------------------------------------------


def _written(raw: str, exp: Expand, local: dict[str, str]) -> bool:
    """Whether *raw* carries a digest or key fingerprint written in the Dockerfile or given
    to the build: hex digits after ARG/ENV substitution (not inside a URL), or a variable
    named like one that the RUN itself does not set (a build argument). A value the RUN
    computes (``SHA=$(curl .../file.sha256)``) was fetched, not written."""
    value = exp(raw)
    if (_DIGEST.search(value) or _SPACED_FPR.search(value)) and "://" not in value \
            and not urls([value]):
        return True
    return any(m.group(1) not in local for m in _DIGEST_VAR.finditer(value))


def _fetched_names(cmds: list[SimpleCommand], exp: Expand) -> tuple[set[str], bool]:
    """Base names of the files the RUN downloads, and whether it downloads a checksum or
    signature file (``SHA256SUMS``, ``x.tar.gz.sha256``, ``x.asc``)."""
    names: set[str] = set()
    check_files = False
    for cmd in cmds:
        for url, dest in _fetched(cmd, exp):
            names.add(posixpath.basename((dest or url).split("?", 1)[0]))
            check_files = check_files or bool(_CHECK_FILE.search(url.split("?", 1)[0]))
    return names, check_files


def _local_file(word: str, fetched: set[str], check_files: bool) -> bool:
    """Whether a checksum or key file named on a command line came with the build (the
    context, an earlier step), not from a download in this RUN."""
    return word not in {"", "-"} and not check_files and posixpath.basename(word) not in fetched


def _checksum_checked(cmd: SimpleCommand, written: bool, fetched: set[str],
                      check_files: bool) -> bool:
    if not _HASH_TOOL.match(cmd.name):
        return False
    if written:  # a digest written in the RUN: echo "<hex>  f" | sha256sum -c, grep, [ = ]
        return True
    opts, operands = options_and_operands(cmd.argv[1:], frozenset({"-a", "--algorithm"}))
    checking = any(o in {"-c", "--check"} or (o[:2] != "--" and "c" in o[1:]) for o in opts)
    return checking and any(_local_file(f, fetched, check_files) for f in operands)


def _key_pinned(cmds: list[SimpleCommand], exp: Expand, local: dict[str, str],
                fetched: set[str], check_files: bool) -> bool:
    """Whether the RUN gives gpg a key it did not fetch: ``--recv-keys <fingerprint>``
    written out, or ``--import``/``--keyring`` of a file from the context."""
    for cmd in cmds:
        if cmd.name not in {"gpg", "gpg2", "gpgv"}:
            continue
        argv = cmd.argv[1:]
        for i, a in enumerate(argv):
            name, eq, inline = a.partition("=")
            rest = [inline] if eq else argv[i + 1:]
            if name in {"--recv-keys", "--recv-key", "--receive-keys"} and (
                    any(_written(k, exp, local) for k in rest[:4])
                    or _written(" ".join(rest[:10]), exp, local)):  # a fingerprint unquoted
                return True
            if name in {"--import", "--keyring"} and rest and not rest[0].startswith("-") \
                    and _local_file(exp(rest[0]), fetched, check_files):
                return True
    return False


def verifies(cmds: list[SimpleCommand], text: str, exp: Expand) -> bool:
    """Whether a RUN checks what it downloads against a digest or a key written in the
    Dockerfile or the context: a checksum tool with a written digest (or a checksum file
    that no download of this RUN fetched), ``gpg --verify``/``gpgv`` with a key given by
    fingerprint or from the context, a signature tool (cosign, minisign, signify,
    slsa-verifier), pip's ``--hash``. Mentioning gpg (``gpg-agent``, ``gnupg``, a copied
    ``*.gpg`` keyring, ``gpg --dearmor`` of a fetched key) is no check."""
    local = assignments(text)
    fetched, check_files = _fetched_names(cmds, exp)
    written = any(_written(w, exp, local) for c in cmds for w in c.argv[1:]
                  if c.name in {"echo", "printf", "grep", "[", "test", "[["}
                  or _HASH_TOOL.match(c.name))
    for cmd in cmds:
        if _checksum_checked(cmd, written, fetched, check_files) or cmd.name in _SIGNERS:
            return True
        if any(a.startswith("--hash=") or a == "--require-hashes" for a in cmd.argv):
            return True
        if cmd.name == "aria2c" and any(a.startswith("--checksum=") and _written(a, exp, local)
                                        for a in cmd.argv):
            return True  # aria2c --checksum=sha-256=<hex> fails the download on a mismatch
    signed = any((c.name in {"gpg", "gpg2"} and "--verify" in c.argv) or c.name == "gpgv"
                 for c in cmds)
    if signed and _key_pinned(cmds, exp, local, fetched, check_files):
        return True
    return "hashlib" in text and bool(_DIGEST.search(text))


# -- apt repositories trusted with a key fetched from the same host ------------------------

#: ``deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://host/path suite``
_DEB_LINE = LazyPattern(r"\bdeb\s+(?:\[([^\]]*)\]\s+)?((?:https?|ftp)://[^\s\"'#]*)")
_SIGNED_BY = LazyPattern(r"signed-by=([^\s\]]+)")
#: keyrings every apt source trusts (``apt-key add``, a file in trusted.gpg.d)
_GLOBAL_KEYRING = "(apt's global keyring)"
#: gpg options that print a key's fingerprint, to compare with one written in the Dockerfile
_SHOW_KEY = frozenset({"--show-keys", "--with-fingerprint", "--fingerprint",
                       "--with-subkey-fingerprint", "--import-options"})


class KeyDownload(NamedTuple):
    """A signing key a build downloads and keeps as an apt keyring."""

    url: str
    #: the keyring's base name, or :data:`_GLOBAL_KEYRING`
    keyring: str
    line: int
    #: the RUN checks the key's fingerprint against one written in the Dockerfile
    checked: bool


def _keyring_of(cmd: SimpleCommand, exp: Expand) -> str | None:
    """The keyring a command of a key's pipeline writes: ``gpg --dearmor -o F``, ``tee F``,
    ``> F``, ``apt-key add -``; None when it writes none."""
    argv = [exp(a) for a in cmd.argv]
    if cmd.name == "apt-key" and "add" in argv[1:]:
        return _GLOBAL_KEYRING
    out = exp(cmd.stdout)
    if cmd.name in {"gpg", "gpg2"}:
        for i, a in enumerate(argv):
            if a in {"-o", "--output"} and i + 1 < len(argv):
                out = argv[i + 1]
            elif a.startswith("--output="):
                out = a.partition("=")[2]
    elif cmd.name == "tee":
        out = next((a for a in argv[1:] if not a.startswith("-")), out)
    if not out or out.startswith("/dev/"):
        return None
    return _GLOBAL_KEYRING if "/etc/apt/trusted.gpg" in out else posixpath.basename(out)


def _fingerprint_checked(cmds: list[SimpleCommand], exp: Expand, local: dict[str, str]) -> bool:
    """Whether a RUN prints a key's fingerprint and compares it with one written out
    (``gpg --show-keys --with-fingerprint k | grep -q <fingerprint>``)."""
    shows = any(c.name in {"gpg", "gpg2"} and _SHOW_KEY & {a.partition("=")[0] for a in c.argv}
                for c in cmds)
    return shows and any(_written(w, exp, local) for c in cmds for w in c.argv[1:]
                         if c.name in {"grep", "[", "test", "[[", "echo", "printf", "awk"})


def _converted(cmd: SimpleCommand, exp: Expand) -> list[tuple[str, str]]:
    """(base name of the file read, keyring written) of ``gpg --dearmor -o KEYRING FILE``,
    ``cp``/``mv``/``install FILE KEYRING`` and ``apt-key add FILE``."""
    argv = [exp(a) for a in cmd.argv]
    operands = [a for a in argv[1:] if not a.startswith("-")]
    if cmd.name in {"gpg", "gpg2"} and operands:
        keyring = _keyring_of(cmd, exp)
        return [(posixpath.basename(operands[-1]), keyring)] if keyring else []
    if cmd.name == "apt-key" and len(operands) >= 2:
        return [(posixpath.basename(operands[-1]), _GLOBAL_KEYRING)]
    if cmd.name in {"cp", "mv", "install"} and len(operands) >= 2:
        dest = operands[-1]
        if "/keyrings/" in dest or "/trusted.gpg" in dest:
            name = _GLOBAL_KEYRING if "/trusted.gpg" in dest else posixpath.basename(dest)
            return [(posixpath.basename(operands[0]), name)]
    return []


def key_downloads(cmds: list[SimpleCommand], text: str, exp: Expand) -> list[KeyDownload]:
    """Signing keys a RUN downloads and stores as apt keyrings: a curl/wget piped into
    ``gpg --dearmor -o``, ``tee`` or ``apt-key add``, or saved to a file under
    ``/usr/share/keyrings``, ``/etc/apt/keyrings`` or ``/etc/apt/trusted.gpg.d``."""
    checked = _fingerprint_checked(cmds, exp, assignments(text))
    out: list[KeyDownload] = []
    saved: dict[str, str] = {}  # base name of a downloaded file -> its URL
    for i, cmd in enumerate(cmds):
        out += [KeyDownload(saved[b], k, cmd.line, checked) for b, k in _converted(cmd, exp)
                if b in saved]
        for url, dest in _fetched(cmd, exp):
            if dest is not None:
                saved[posixpath.basename(dest)] = url
                if "/keyrings/" in dest or "/trusted.gpg" in dest:
                    name = _GLOBAL_KEYRING if "/trusted.gpg" in dest else posixpath.basename(dest)
                    out.append(KeyDownload(url, name, cmd.line, checked))
                continue
            j = i
            while cmds[j].piped and j + 1 < len(cmds):
                j += 1
                keyring = _keyring_of(cmds[j], exp)
                if keyring is not None:
                    out.append(KeyDownload(url, keyring, cmd.line, checked))
                    break
    return out


#: the keyring of a source list downloaded whole (its content is not known here)
_ANY_KEYRING = "*"


def apt_sources(cmds: list[SimpleCommand], exp: Expand) -> list[tuple[str, str, int]]:
    """(keyring base name or :data:`_GLOBAL_KEYRING`, repository URL, line) of each apt
    source line a RUN writes (``echo "deb [signed-by=...] URL ..." > x.list``,
    ``add-apt-repository``). A line rewritten from a downloaded list (``curl URL.list | sed
    's#deb https://#deb [signed-by=...] https://#'``) takes that download's URL."""
    out: list[tuple[str, str, int]] = []
    feed = ""
    for cmd in cmds:
        words = " ".join(exp(a) for a in cmd.argv[1:])
        fetched = _fetched(cmd, exp)
        for m in _DEB_LINE.finditer(words):
            url = m.group(2) if url_host(m.group(2)) else feed
            signed = _SIGNED_BY.search(m.group(1) or "")
            keyring = posixpath.basename(signed.group(1)) if signed else _GLOBAL_KEYRING
            if url:
                out.append((keyring, url, cmd.line))
        # a list file downloaded whole (`wget -qO /etc/apt/sources.list.d/x.list URL`): its
        # repository is what the host serves; its keyring unknown, so any key counts
        out += [(_ANY_KEYRING, url, cmd.line) for url, dest in fetched
                if dest and "sources.list" in dest and dest.endswith((".list", ".sources"))]
        if fetched and cmd.piped:
            feed = fetched[0][0]
        elif not cmd.piped:
            feed = ""
    return out


def same_host_keys(sources: list[tuple[str, str, int]], keys: list[KeyDownload],
                   run_line: int = 0) -> list[Unverified]:
    """Apt repositories trusted with a key downloaded from the repository's own host, with
    no fingerprint written in the Dockerfile to check it: whoever controls the host controls
    both, so the signature proves nothing. A key's line other than *run_line* (the RUN that
    writes the sources) is named."""
    out: list[Unverified] = []
    for keyring, url, line in sources:
        for key in keys:
            if keyring in {key.keyring, _ANY_KEYRING} and not key.checked \
                    and url_host(key.url) == url_host(url) and not is_loopback(url):
                at = "" if key.line == run_line else f" at line {key.line}"
                out.append(Unverified(
                    f"trusts the apt repository {shown(url)} with the key {shown(key.url)} "
                    f"fetched from the same host in the same build{at}, checked against no "
                    "fingerprint written in the Dockerfile", line, url))
                break
    return out


# -- pip installs of what a URL or a branch holds ------------------------------------------


def _vcs_ref(spec: str) -> tuple[str, str | None]:
    """(url, ref or None) of ``git+https://host/o/r@ref#egg=x`` or ``name @ git+...``."""
    url = spec.split(" @ ", 1)[-1].strip().split("#", 1)[0]
    path = url.split("://", 1)[-1]
    host_and_path, at, ref = path.rpartition("@")
    if not at or "/" not in host_and_path:  # git+ssh://git@host/o/r: that @ is the user
        return url, None
    return url.rsplit("@", 1)[0], ref


#: ``V=$(curl -s https://api.github.com/repos/o/r/releases/latest | jq -r .tag_name)``: a
#: variable a RUN sets from what a download returns
_NETWORK_VALUE = LazyPattern(
    r"\b([A-Za-z_][A-Za-z0-9_]*)=[\"']?\$\(\s*(?:curl|wget|aria2c)\b[^)]*?"
    r"((?:https?|ftp)://[^\s\"')|]+)")
_REF_VAR = LazyPattern(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


def network_values(text: str) -> dict[str, str]:
    """Variables *text* (a RUN) sets from a download's output, each with the URL read: a
    version or tag taken from ``releases/latest`` at build moves with every release."""
    return {m.group(1): m.group(2) for m in _NETWORK_VALUE.finditer(text)}


def _pip_problem(spec: str, fetched: dict[str, str] | None = None) -> str | None:
    """What is unverified about one pip requirement on a command line, or None (*fetched*:
    :func:`network_values` of the RUN)."""
    if spec.startswith(("git+", "hg+")) or " @ git+" in spec:
        url, ref = _vcs_ref(spec)
        if ref is not None and re.fullmatch(r"[0-9a-f]{40}", ref):
            return None
        if ref is None:
            return f"installs {url} at its default branch"
        var = _REF_VAR.match(ref)
        if var is not None and var.group(1) in (fetched or {}):
            return (f"installs {url} at the ref in {ref}, read at build from "
                    f"{shown((fetched or {})[var.group(1)])}: it moves with every release")
        if _ref_pinned(ref) and "$" not in ref:
            return (f"installs {url} at the tag {ref}: a tag is mutable, as an image tag is "
                    "against a digest")
        return None if "$" in ref else f"installs {url} at the branch {ref}"
    target = _DIRECT_REF.sub("", spec)  # `name[extra] @ https://...` (PEP 508)
    if urls([target]) and "#sha256=" not in target and not is_loopback(target):
        return f"installs {spec} with no hash"
    return None


#: the name of a PEP 508 direct reference (``wyoming[zeroconf] @ https://.../v1.tar.gz``)
_DIRECT_REF = LazyPattern(r"^[A-Za-z0-9][\w.\[\],-]*\s*@\s*(?=[a-z+]+://)")


def pip_unverified(cmd: SimpleCommand, exp: Expand,
                   fetched: dict[str, str] | None = None) -> list[str]:
    """What a ``pip install`` (or ``uv pip install``) takes from a URL or a git branch or tag
    with nothing to check it: a wheel or sdist URL without ``#sha256=`` or ``--hash``, a
    ``git+`` requirement not pinned to a 40-hex commit."""
    if cmd.name != "pip" or "install" not in cmd.argv[1:3] or "--require-hashes" in cmd.argv:
        return []
    from servelab.lint.packages import PIP_WITH_VALUE

    _opts, operands = options_and_operands(cmd.argv[cmd.argv.index("install") + 1:],
                                           PIP_WITH_VALUE)
    return [p for p in (_pip_problem(exp(op), fetched) for op in operands) if p]


# -- downloads that are run or installed -----------------------------------------------------


def unverified_downloads(text: str, exp: Expand, *, known_urls_only: bool = False,
                         ) -> list[Unverified]:
    """Downloads in *text* (one RUN or script) that run or install unchecked content.
    With *known_urls_only* (a script a RUN runs), a URL still holding a variable after
    substitution is skipped: such a download often sits behind a guard on that variable."""
    cmds = commands(text)
    checked = verifies(cmds, text, exp)
    made_exec = _executables(cmds)
    fetched = network_values(text)
    out: list[Unverified] = []
    for m in _FED_TO_SHELL.finditer(text):
        found = urls([exp(w) for w in m.group(2).split()])
        if found and not is_loopback(found[0]):
            line = text.count("\n", 0, m.start()) + 1
            out.append(Unverified(f"runs a downloaded script unchecked ({m.group(1)} "
                                  f"{shown(found[0])} fed to a shell)", line, found[0]))
    fed = {u.url for u in out}
    for i, cmd in enumerate(cmds):
        if not checked:
            out += [Unverified(what, cmd.line) for what in pip_unverified(cmd, exp, fetched)]
        for url, dest in _fetched(cmd, exp):
            if is_loopback(url) or url in fed or (known_urls_only and "$" in url):
                continue
            interp = _piped_into_interpreter(cmds, i, exp) if dest is None else None
            if interp is not None:
                out.append(Unverified(f"runs a downloaded script unchecked ({cmd.name} "
                                      f"{shown(url)} | {interp})", cmd.line, url))
                continue
            if checked or (dest is None and not cmd.piped):
                continue  # verified, or printed / captured rather than saved or unpacked
            # piped into tar: an archive whatever its name (a model's too: it is unpacked)
            piped_in = dest is None and unpack.unpacked_to(cmds, i, None) is not None
            kind = "an archive" if piped_in else _kind(url, dest, made_exec)
            if kind:
                out.append(Unverified(f"downloads {kind} ({shown(url)}) and checks no "
                                      "checksum or signature", cmd.line, url))
    return out


# -- git clone of a branch, then built -------------------------------------------------------

_CLONE_WITH_VALUE = frozenset({
    "-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "--reference",
    "--separate-git-dir", "-j", "--jobs", "--filter", "--shallow-since", "--shallow-exclude",
    "-u", "--upload-pack", "--template", "--revision",
})
_PINNED_REF = LazyPattern(r"^(v?\d+([._-]\d+)+.*|[0-9a-f]{7,40}|.*\d+\.\d+.*|[a-z]*-?v\d.*)$",
                         re.I)
_BUILDERS = {
    ("pip", "install"), ("pip", "wheel"), ("python", "setup.py"), ("python3", "setup.py"),
    ("make", ""),
    ("cmake", ""), ("ninja", ""), ("cargo", "build"), ("cargo", "install"), ("go", "build"),
    ("go", "install"), ("npm", "install"), ("npm", "ci"), ("maturin", "build"),
    ("poetry", "install"), ("uv", "sync"), ("./configure", ""), ("configure", ""),
}


class _Pending:
    """A git clone or a downloaded file seen in a stage, and what became of it."""

    __slots__ = ("branch", "done", "kind", "line", "name", "path", "pinned", "tag", "unpack_only",
                 "url", "via")

    def __init__(self, kind: str, url: str, name: str, line: int, *,
                 branch: str | None = None, pinned: bool = False, tag: bool = False) -> None:
        #: "clone" or "download"
        self.kind = kind
        self.url = url
        #: the base name of the clone's folder or of the downloaded file
        self.name = name
        self.line = line
        self.branch = branch
        self.pinned = pinned
        #: *branch* is a tag (or an abbreviated commit): mutable, unlike a 40-hex commit
        self.tag = tag
        #: reported, or checked before use
        self.done = False
        #: how it reached this stage (", copied into stage app at line 40"), or ""
        self.via = ""
        #: the clone's folder as an absolute image path, where known (else "")
        self.path = ""
        #: a download of weights or from the hub: only unpacking it counts (running or
        #: loading weights is weights-baked's)
        self.unpack_only = False

    def carried(self, name: str, via: str) -> _Pending:
        out = _Pending(self.kind, self.url, name, self.line, branch=self.branch,
                       pinned=self.pinned, tag=self.tag)
        out.unpack_only = self.unpack_only
        out.via = self.via + via + ","
        return out


_Clone = _Pending


def _ref_pinned(ref: str) -> bool:
    return "$" in ref or bool(_PINNED_REF.match(ref))


def _ref_kind(ref: str) -> str:
    """"commit" (a 40-hex commit, immutable; or a ref still holding a variable, not
    judged), "tag" (a version tag or an abbreviated commit: mutable, as an image tag is
    against a digest) or "branch"."""
    if "$" in ref or re.fullmatch(r"[0-9a-f]{40}", ref):
        return "commit"
    return "tag" if _PINNED_REF.match(ref) else "branch"


def _clone(cmd: SimpleCommand, exp: Expand, cwd: str = "") -> _Clone | None:
    argv = [exp(a) for a in cmd.argv]
    if cmd.name != "git" or "clone" not in argv[1:3]:
        return None
    rest = argv[argv.index("clone") + 1:]
    opts, operands = options_and_operands(rest, _CLONE_WITH_VALUE)
    found = urls(operands) or [o for o in operands if o.startswith("git@")]
    if not found or HUB_URL.search(found[0]):
        return None
    branch = None
    for i, o in enumerate(opts):
        name, eq, val = o.partition("=")
        if name in {"-b", "--branch", "--revision"}:
            branch = val if eq else (opts[i + 1] if i + 1 < len(opts) else "")
    after = operands[operands.index(found[0]) + 1:]
    dest = after[0] if after else posixpath.basename(found[0].rstrip("/")).removesuffix(".git")
    kind = _ref_kind(branch) if branch is not None else "branch"
    out = _Pending("clone", found[0], posixpath.basename(dest.rstrip("/")), cmd.line,
                   branch=branch, pinned=kind == "commit", tag=kind == "tag")
    if cwd.startswith("/") and "$" not in dest:  # `git clone URL .` clones into the cwd
        out.path = posixpath.normpath(posixpath.join(cwd, dest))
        out.name = posixpath.basename(out.path) or out.name
    return out


def _enters(path: str, dest: str, clone: str = "") -> bool:
    """Whether the folder *path* is the clone (folder name *dest*, absolute path *clone*
    where known) or inside it."""
    if clone and path.startswith("/"):
        return path == clone or path.startswith(clone.rstrip("/") + "/")
    parts = [p for p in path.split("/") if p not in {"", "."}]
    return dest in parts


#: scripts named for building or installing what they sit beside (``install.py``,
#: ``setup.sh``, ``build_ext.sh``): run in a clone, or by a path into it, they build it
_BUILD_SCRIPT = LazyPattern(
    r"^([\w.-]*[-_])?(install|setup|build|compile)([-_.\w]*)\.(py|sh|bash)$", re.I)


_SCRIPT_ENDINGS = (".py", ".sh", ".bash")


def _script_builds(cmd: SimpleCommand, dest: str, inside: bool, clone: str, cwd: str) -> bool:
    """``python install.py``, ``bash setup.sh``, ``./build.sh`` (or ``python /install.py``
    copied in) run in the clone, or ``python /src/x/install.py`` by a path into it."""
    words = [cmd.argv[0]]
    if cmd.name in _SHELLS or _INTERPRETER.match(cmd.name):
        words += [a for a in cmd.argv[1:] if not a.startswith("-")][:1]
    for word in words:
        named = bool(_BUILD_SCRIPT.match(posixpath.basename(word)))
        # any script of the clone's own run at build (`python launch.py` in it, `sh
        # $NVM_DIR/nvm.sh`) runs what the branch holds that day, as a build does
        script = named or word.endswith(_SCRIPT_ENDINGS)
        if inside and (named or (script and "/" not in word) or word.startswith("./")):
            return True
        folder = posixpath.dirname(word)
        where = folder if folder.startswith("/") else posixpath.join(cwd, folder)
        if script and folder and _enters(where, dest, clone):
            return True
    return False


def _builds(cmd: SimpleCommand, dest: str, inside: bool, clone: str = "", cwd: str = "") -> bool:
    """Whether *cmd* builds or installs the clone in folder *dest* (*inside*: run in it;
    *clone*: its absolute path where known; *cwd*: where *cmd* runs)."""
    argv = cmd.argv
    sub = argv[1] if len(argv) > 1 else ""
    if (cmd.name, sub) in _BUILDERS or (cmd.name, "") in _BUILDERS:
        if inside:
            return True
        # a path into the clone: `pip install ./x`, `cmake x -B x/build`, `make -C x`
        return any(_enters(a.rpartition("=")[2], dest, clone) for a in argv[1:]
                   if a.rpartition("=")[2] not in {"", "."})
    return _script_builds(cmd, dest, inside, clone, cwd)


def _checkout(cmd: SimpleCommand, exp: Expand) -> tuple[str, str] | None:
    """(ref, :func:`_ref_kind` of it) of a ``git checkout/reset/switch <ref>`` of a tag or
    commit; None for anything else (a branch checked out changes nothing)."""
    argv = [exp(a) for a in cmd.argv]
    if cmd.name != "git":
        return None
    i = 1
    while i < len(argv) and argv[i] in {"-C", "-c"}:
        i += 2
    sub, args = (argv[i], argv[i + 1:]) if i < len(argv) else ("", [])
    refs = [a for a in args if not a.startswith("-")]
    if sub not in {"checkout", "reset", "switch"} or not refs:
        return None
    ref = refs[0].removeprefix("refs/").removeprefix("tags/")
    kind = "tag" if ref != refs[0] and _ref_kind(ref) == "branch" else _ref_kind(ref)
    return None if kind == "branch" else (ref, kind)


def _git_in(cmd: SimpleCommand, exp: Expand, cwd: str, p: _Pending) -> bool:
    """``git -C DIR ...`` with DIR the clone *p* (or inside it), run from *cwd*."""
    argv = cmd.argv
    if cmd.name != "git" or "-C" not in argv[1:-1]:
        return False
    where = exp(argv[argv.index("-C") + 1])
    if not where.startswith("/") and cwd.startswith("/"):
        where = posixpath.normpath(posixpath.join(cwd, where))
    return _enters(where, p.name, p.path)


def _clone_message(p: _Pending, line: int) -> str:
    if p.tag:
        return (f"clones {p.url} at the tag {p.branch}{p.via} and builds or installs it (line "
                f"{line}): a tag is mutable, as an image tag is against a digest; only a "
                "40-hex commit checked out is immutable")
    what = f"branch {p.branch}" if p.branch else "its default branch"
    return (f"clones {p.url} at {what}{p.via} and builds or installs it (line {line}) with "
            "no commit checked out")


#: programs that run, install or unpack the file they are given
_RUNNERS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "source", ".", "perl", "ruby",
                      "node", "dpkg", "rpm", "apt-get", "apt", "pip", "java"}) | unpack.EXTRACTORS


def _runs(cmd: SimpleCommand, name: str) -> bool:
    """Whether *cmd* runs, installs or unpacks the file named *name* (a base name)."""
    if posixpath.basename(cmd.argv[0]) == name:
        return True
    if cmd.name not in _RUNNERS and not _INTERPRETER.match(cmd.name):
        return False
    # a glob names it too: `tar -xzf ./2*` of wget's `2` (from `.../2?tf-hub-format=...`)
    return any(unpack.names(a, name) for a in cmd.argv[1:] if not a.startswith("-"))


class Flow:
    """Clones of a branch and unchecked downloads followed across the RUNs of a stage and
    into the stages that copy them (``COPY --from``): a clone built, or a downloaded file run,
    installed or unpacked, in a later RUN is the same unverified download as in one RUN.

    *exp_for* gives a RUN text's word substitution. :attr:`found` holds (instruction line,
    message) of what was found, each naming both lines."""

    def __init__(self, exp_for: Callable[[str], Expand]) -> None:
        self.exp_for = exp_for
        self.pending: list[_Pending] = []
        self.found: list[tuple[int, str]] = []

    def inherit(self, parent: Flow) -> None:
        """A stage built FROM *parent* holds what it holds, at the same paths."""
        self.pending += [p for p in parent.pending if not p.done and not p.pinned]

    def copy_from(self, other: Flow, sources: list[str], dest: str, line: int,
                  stage: str) -> None:
        """``COPY --from=<stage> SOURCES DEST`` at *line* brings *other*'s clones and
        downloads whose name (or folder) is copied."""
        for p in other.pending:
            if p.done or p.pinned:
                continue
            for src in sources:
                base = posixpath.basename(src.rstrip("/"))
                if base == p.name or src.rstrip("/") in {"", "."}:
                    name = p.name if dest.endswith("/") or base != p.name else \
                        posixpath.basename(dest.rstrip("/")) or p.name
                    self.pending.append(p.carried(name, f", copied from stage {stage} at line "
                                                        f"{line}"))
                    break

    def run(self, line: int, text: str, workdir: str) -> None:
        """Follow one RUN (at *line*, its text, its WORKDIR)."""
        # what is done or pinned is never looked at again: keeping it made every command
        # of every later RUN walk all of the stage's clones and downloads (quadratic)
        self.pending = [p for p in self.pending if not p.done and not p.pinned]
        exp = self.exp_for(text)
        cmds = commands(text)
        checked = verifies(cmds, text, exp)
        reported = {u.url for u in unverified_downloads(text, exp)}
        cwd = workdir or "/"
        for cmd in cmds:
            if cmd.name == "cd" and len(cmd.argv) > 1:
                into = exp(cmd.argv[1])
                # `cd zfp && mkdir build && cd build && cmake ..`: a path relative to where
                # the shell is; a folder still holding a variable is kept as written
                cwd = into if "$" in into or not cwd.startswith("/") else \
                    posixpath.normpath(posixpath.join(cwd, into))
            c = _clone(cmd, exp, cwd)
            if c is not None:
                c.line = line
                self.pending.append(c)
                continue
            live = [p for p in self.pending if not p.done and not p.pinned]
            if live:  # the command's words expanded once, for every clone it may build
                words = SimpleCommand([exp(a) for a in cmd.argv], cmd.env, cmd.line)
                for p in live:
                    if not p.done and not p.pinned:
                        self._use(p, cmd, (exp, cwd, words), line, checked)
            self._downloads(cmd, exp, line, checked, reported)

    def _use(self, p: _Pending, cmd: SimpleCommand,
             where: tuple[Expand, str, SimpleCommand], line: int, checked: bool) -> None:
        """What *cmd* (run in folder ``where[1]``; ``where[2]``: its words expanded) does with
        the clone or download *p*."""
        exp, cwd, words = where
        if p.kind == "clone":
            inside = _enters(cwd, p.name, p.path)
            ref = _checkout(cmd, exp) if inside or _git_in(cmd, exp, cwd, p) else None
            if ref is not None:
                p.pinned, p.tag, p.branch = ref[1] == "commit", ref[1] == "tag", ref[0]
            elif _builds(words, p.name, inside, p.path, cwd):
                p.done = True
                self.found.append((p.line, _clone_message(p, line)))
        elif _runs(cmd, p.name) and (not p.unpack_only or unpack.extraction(cmd) is not None):
            p.done = True
            if not checked:
                at = "in the same RUN" if line == p.line and not p.via else f"at line {line}"
                self.found.append((p.line, f"downloads {shown(p.url)}{p.via} and runs, "
                                           f"installs or unpacks it ({cmd.name}, {at}) "
                                           "with no checksum or signature check"))

    def _downloads(self, cmd: SimpleCommand, exp: Expand, line: int, checked: bool,
                   reported: set[str]) -> None:
        if checked:
            return
        for url, dest in _fetched(cmd, exp):
            if dest and url not in reported and not is_loopback(url):
                p = _Pending("download", url, posixpath.basename(dest), line)
                p.unpack_only = is_weight_path(url) or bool(HUB_URL.search(url))
                self.pending.append(p)


def branch_builds(runs: Iterable[tuple[int, str, str]],
                  exp_for: Callable[[str], Expand]) -> list[tuple[int, str]]:
    """(instruction line, message) for each clone of a branch that a later command of the
    stage builds or installs, and each unchecked download a later command runs. *runs* are
    the stage's RUNs (line, text, WORKDIR) in order."""
    flow = Flow(exp_for)
    for line, text, workdir in runs:
        flow.run(line, text, workdir)
    return flow.found
