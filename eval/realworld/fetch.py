"""Fill the cache of servelab's real-world corpus: the public files listed in files.tsv.

The project keeps only references (repository, path, commit) and the truths, never the files.
This script puts each file, byte for byte, at CACHE/<id>/Dockerfile (kind dockerfile) or
CACHE/<id>/manifest.yaml (kind manifest), outside the repository, where score.py reads it.

    python eval/realworld/fetch.py                       # download (needs internet)
    python eval/realworld/fetch.py --from-dir DIR        # copy already-fetched files
    python eval/realworld/fetch.py --check               # only report what the cache lacks

Downloads use GitHub's raw URL form for a file at a commit,
https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<path>, so the bytes are the ones
the truths were written on, whatever the repository's branch holds today.

--from-dir DIR takes files fetched some other way (on a machine without GitHub access the
cache was filled with the search tool's read_file / fetch, which return the file at a
commit). DIR holds either the cache layout (DIR/<id>/Dockerfile, DIR/<id>/manifest.yaml) or
one file per id (DIR/<id>, any extension).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: outside the repository; SERVELAB_REALWORLD_CACHE overrides it
DEFAULT_CACHE = Path(os.environ.get("SERVELAB_REALWORLD_CACHE",
                                    "/var/tmp/servelab-realworld"))  # noqa: S108
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
NAMES = {"dockerfile": "Dockerfile", "manifest": "manifest.yaml"}
MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    id: str
    kind: str
    repo: str
    path: str
    commit: str
    date_added: str = ""


def load_files(path: Path = HERE / "files.tsv") -> list[Entry]:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [Entry(r["id"], r["kind"], r["repo"], r["path"], r["commit"], r.get("date_added") or "")
            for r in rows]


def cached_path(cache: Path, entry: Entry) -> Path:
    return cache / entry.id / NAMES[entry.kind]


def raw_url(entry: Entry) -> str:
    return RAW.format(repo=entry.repo, commit=entry.commit,
                      path=urllib.parse.quote(entry.path))


def _download(entry: Entry, timeout: float) -> bytes:
    with urllib.request.urlopen(raw_url(entry), timeout=timeout) as resp:  # noqa: S310
        data: bytes = resp.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES} bytes")
    return data


def _from_dir(src: Path, entry: Entry) -> Path | None:
    layout = src / entry.id / NAMES[entry.kind]
    if layout.is_file():
        return layout
    flat = sorted(p for p in src.glob(f"{entry.id}*") if p.is_file()
                  and p.name.split(".", 1)[0] == entry.id)
    return flat[0] if flat else None


def fill(entries: list[Entry], cache: Path, src: Path | None, timeout: float) -> int:
    missing = 0
    for entry in entries:
        dest = cached_path(cache, entry)
        if dest.is_file():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            if src is not None:
                found = _from_dir(src, entry)
                if found is None:
                    raise FileNotFoundError(f"not in {src}")
                shutil.copyfile(found, dest)
            else:
                dest.write_bytes(_download(entry, timeout))
        except (OSError, ValueError) as exc:
            missing += 1
            print(f"{entry.id}: not fetched ({entry.repo} {entry.path} @ {entry.commit[:12]}): "
                  f"{exc}", file=sys.stderr)
    return missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help=f"where the files go (default {DEFAULT_CACHE})")
    ap.add_argument("--from-dir", type=Path, metavar="DIR",
                    help="copy already-fetched files from DIR instead of downloading")
    ap.add_argument("--check", action="store_true", help="only list the ids the cache lacks")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    entries = load_files()
    if args.check:
        lacking = [e.id for e in entries if not cached_path(args.cache, e).is_file()]
        print(f"{len(entries) - len(lacking)} of {len(entries)} files cached in {args.cache}")
        for ident in lacking:
            print(f"  missing: {ident}")
        return 1 if lacking else 0
    missing = fill(entries, args.cache, args.from_dir, args.timeout)
    print(f"{len(entries) - missing} of {len(entries)} files in {args.cache}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
