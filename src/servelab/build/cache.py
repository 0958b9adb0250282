"""BuildKit's cache of one build, pruned once the build's record is written.

API::

    before = cache_ids(builder_args)        # the records the builder holds now (None: unknown)
    ...                                     # docker buildx build ...
    pruned = prune_new(before, builder_args)  # -> Pruned (records, bytes freed, left)

A no-cache build still leaves its layers in BuildKit's cache (the snapshot of each new layer
and its compressed blob, about U + C of the image), and nothing removes them: six builds of a
2.1 GB image left 20 GB. servelab removes the records its build made: among the IDs that
``docker buildx du --verbose`` lists after it and not before it, those whose description is
one of the build's own steps
(the step names BuildKit reported while it built: ``[2/4] COPY ...``, a ``RUN``'s
``mount / from exec ... <its command>``), pruned with one ``docker buildx prune --all
--filter id=^(a|b|...)$`` (buildx turns an ``id`` filter into BuildKit's regular-expression
match; ``--all`` because BuildKit otherwise skips a record whose layers an image in the
engine shares). Records it could not prune at once are tried again after the next build and
at the run's end (:func:`prune_left`).
Records that were there before (the user's own cache), cache mounts (``RUN
--mount=type=cache``: kept on purpose), the base image's layers (a ``FROM`` step: another
build on the same base may be using them at that moment, which failed its export) and the
steps of other builds running at the same time are never named. The context transfer
(``local source for context``: one record per context directory, sometimes reused by the
next build of it and sometimes made anew, so kept ones add up with the repeats) is not one
build's own: every build's transfer is described alike, and pruning another
build's while it exports fails that build ("failed to solve: not found"). The run prunes the
transfers that appeared since its first build, after each build and at its end
(:func:`prune_transfers`; ``SERVELAB_KEEP_BUILD_CACHE=1`` keeps them for a builder shared
with concurrent builds); docs/run.md, "Disk".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from servelab import proc
from servelab.errors import ServelabError

_ID = re.compile(r"^ID:\s+([a-z0-9]+)\s*$", re.MULTILINE)
_TOTAL = re.compile(r"^Total:\s+([0-9.]+)\s*([kMGT]?B)\s*$", re.MULTILINE)
_UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
#: ``1``: keep every build's cache (a builder shared with identical builds running at once)
KEEP_ENV = "SERVELAB_KEEP_BUILD_CACHE"
#: IDs per prune call (one regular expression each), so a command line stays short
BATCH = 200


@dataclass
class Pruned:
    """What pruning one build's cache did."""

    records: int = 0
    bytes_freed: int = 0
    notes: list[str] = field(default_factory=list)
    #: records of the build still there afterwards (in use, or the prune failed):
    #: :func:`prune_left` tries them again later (after the next build, at the run's end)
    left_ids: set[str] = field(default_factory=set)

    @property
    def left(self) -> int:
        return len(self.left_ids)

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records, "bytes_freed": self.bytes_freed, "left": self.left,
                "notes": list(self.notes)}


def parse_ids(text: str) -> set[str]:
    """The record IDs of ``docker buildx du --verbose`` (or ``prune --verbose``)."""
    return set(_ID.findall(text))


def parse_records(text: str) -> dict[str, str]:
    """Record ID -> description, from ``docker buildx du --verbose``."""
    out: dict[str, str] = {}
    for block in re.split(r"\n\s*\n", text):
        m = _ID.search(block)
        if m is None:
            continue
        d = re.search(r"^Description:\s*(.*)$", block, re.MULTILINE)
        out[m.group(1)] = d.group(1).strip() if d else ""
    return out


#: records another build may be using at the same moment: the base image's layers (a
#: ``FROM`` step, a pulled image) and BuildKit's internal loads; never pruned by a build
_SHARED = re.compile(r"^(\[[^\]]*\] FROM |FROM |pulled from |\[internal\] )")


def owned(description: str, steps: list[str]) -> bool:
    """Whether a record described so was made by a build whose steps are *steps* (and only
    by it: a base image's layers are shared with every build on it, :data:`_SHARED`)."""
    if _SHARED.match(description):
        return False
    if description in steps:
        return True
    if description.startswith("mount / from exec "):
        cmd = description[len("mount / from exec "):]
        cmd = cmd.split(" -c ", 1)[1] if " -c " in cmd else cmd
        for step in steps:
            run = step.split(" RUN ", 1)[1] if " RUN " in step else None
            if run and (run.endswith(cmd) or cmd.endswith(run)):
                return True
    return False


def parse_total(text: str) -> int:
    """Bytes of the ``Total:`` line of ``docker buildx prune`` (0 when absent)."""
    m = _TOTAL.search(text)
    return round(float(m.group(1)) * _UNITS[m.group(2)]) if m else 0


def cache_records(builder_args: list[str]) -> dict[str, str] | None:
    """The builder's cache records now (ID -> description); None when they cannot be
    listed."""
    try:
        res = proc.run(["docker", "buildx", "du", *builder_args, "--verbose"], timeout=120,
                       check=False)
    except ServelabError:
        return None
    return parse_records(res.stdout) if res.returncode == 0 else None


def cache_ids(builder_args: list[str]) -> set[str] | None:
    """The builder's cache record IDs now; None when they cannot be listed."""
    records = cache_records(builder_args)
    return set(records) if records is not None else None


def prune_ids(ids: set[str], builder_args: list[str]) -> Pruned:
    """Prune exactly *ids* (never another record)."""
    done = Pruned()
    todo = sorted(i for i in ids if re.fullmatch(r"[a-z0-9]+", i))
    for k in range(0, len(todo), BATCH):
        chunk = todo[k:k + BATCH]
        # --all: BuildKit skips, without it, a record whose layers an image in the engine
        # shares ("Shared: true": the previous repeat's image of the same layers, or a
        # record an earlier run left), and the 2.1 GB image's two big layers stayed for good
        argv = ["docker", "buildx", "prune", *builder_args, "--all", "--force", "--verbose",
                "--filter", "id=^(" + "|".join(chunk) + ")$"]
        try:
            res = proc.run(argv, timeout=600, check=False)
        except ServelabError as e:
            done.notes.append(f"build cache not pruned: {e.message}")
            continue
        if res.returncode != 0:
            done.notes.append("build cache not pruned: "
                              + (proc.tail(res.stderr, 2, inline=True) or "no output"))
            continue
        done.records += len(parse_ids(res.stdout) & set(chunk))
        done.bytes_freed += parse_total(res.stdout)
    return done


#: a context transfer's record: one per directory a build sent (``context``, ``dockerfile``)
_TRANSFER = re.compile(r"^local source for ")


def prune_transfers(before: set[str] | None, builder_args: list[str]) -> Pruned:
    """After each of a run's builds, and at its end: the context transfers that appeared
    since *before* (the records before its first build). Kept, they went nowhere after the
    run (a 4 GB context left 4 GB in the engine), and BuildKit may make a new one for the next
    build of the same directory, so they added up with the repeats (a 2.1 GB image's peak
    moved between 11.7 and 13.6 GB with it). The next build sends the context again. Records
    still in use (another build sending right now) are skipped by BuildKit itself."""
    if os.environ.get(KEEP_ENV) == "1" or before is None:
        return Pruned()
    now = cache_records(builder_args)
    if now is None:
        return Pruned(notes=["context transfers not pruned: the records could not be listed"])
    return prune_ids({i for i, d in now.items() if i not in before and _TRANSFER.match(d)},
                     builder_args)


def prune_new(before: set[str] | None, builder_args: list[str], steps: list[str]) -> Pruned:
    """Prune the records that appeared since *before* was listed and that the build of
    *steps* made (:func:`owned`). Those BuildKit would not prune (in use, or the parent of a
    record that is not the build's) are in ``left_ids``, for :func:`prune_left`."""
    if os.environ.get(KEEP_ENV) == "1":
        return Pruned(notes=[f"build cache kept ({KEEP_ENV}=1)"])
    if before is None:
        return Pruned(notes=["build cache not pruned: its records could not be listed "
                             "before the build"])
    now = cache_records(builder_args)
    if now is None:
        return Pruned(notes=["build cache not pruned: its records could not be listed"])
    ours = {i for i, desc in now.items() if i not in before and owned(desc, steps)}
    done = _prune_rounds(ours, builder_args)
    if done.left:
        done.notes.append(f"build cache: {done.left} record(s) of this build still in use, "
                          "tried again after the next build and at the run's end")
    return done


def prune_left(ids: set[str], builder_args: list[str]) -> Pruned:
    """Records an earlier :func:`prune_new` left in use: pruned now if they are still there
    (no wait; what is still in use stays in ``left_ids``)."""
    if not ids or os.environ.get(KEEP_ENV) == "1":
        return Pruned(left_ids=set(ids))
    now = cache_ids(builder_args)
    if now is None:
        return Pruned(left_ids=set(ids), notes=["build cache: its records could not be listed"])
    return _prune_rounds(ids & now, builder_args)


def _prune_rounds(ours: set[str], builder_args: list[str]) -> Pruned:
    """Prune *ours* in rounds: a parent record goes once its children have."""
    done = Pruned()
    for _round in range(4):
        if not ours:
            break
        step = prune_ids(ours, builder_args)
        done.records += step.records
        done.bytes_freed += step.bytes_freed
        done.notes = step.notes
        after = cache_ids(builder_args)
        if after is None or step.records == 0:
            break
        ours &= after
    done.left_ids = set(ours)
    return done
