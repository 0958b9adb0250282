"""Which BuildKit cache records a build made (build/cache.py), from `docker buildx du
--verbose` as buildx 0.13 prints it."""

from __future__ import annotations

from servelab.build.cache import owned, parse_records, parse_total

DU = """ID:\t\tabc123
Parent:\t\tzzz
Created at:\t2026-12-03 08:20:35 +0000 UTC
Mutable:\tfalse
Reclaimable:\ttrue
Shared:\t\tfalse
Size:\t\t948.3MB
Description:\t[2/5] COPY site-packages/ /usr/local/lib/python3.11/dist-packages/
Usage count:\t1
Last used:\t2 minutes ago
Type:\t\tregular

ID:\t\tdef456
Created at:\t2026-12-03 08:20:35 +0000 UTC
Size:\t\t12.39kB
Description:\tmount / from exec /bin/sh -c pip install --no-index -r /ctx/req.txt
Type:\t\tregular

ID:\t\tghi789
Size:\t\t66.62MB
Type:\t\tregular

Reclaimable:\t1.0GB
Total:\t\t1.027GB
"""

STEPS = ["[internal] load build definition from Dockerfile",
         "[2/5] COPY site-packages/ /usr/local/lib/python3.11/dist-packages/",
         "[3/5] RUN --mount=type=bind,source=.,target=/ctx pip install --no-index -r "
         "/ctx/req.txt"]


def test_records_and_their_descriptions() -> None:
    assert parse_records(DU) == {
        "abc123": "[2/5] COPY site-packages/ /usr/local/lib/python3.11/dist-packages/",
        "def456": "mount / from exec /bin/sh -c pip install --no-index -r /ctx/req.txt",
        "ghi789": ""}
    assert parse_total("Total:\t6.017MB\n") == 6_017_000
    assert parse_total(DU) == 1_027_000_000
    assert parse_total("nothing pruned\n") == 0


def test_a_build_owns_its_steps_and_its_context_only() -> None:
    records = parse_records(DU)
    assert owned(records["abc123"], STEPS)
    assert owned(records["def456"], STEPS)  # the RUN, its flags left out of the record
    assert not owned(records["ghi789"], STEPS)  # the base's snapshot: not this build's
    # every build's context transfer is described alike: never taken for this build's
    assert not owned("local source for context", STEPS)
    assert not owned("[2/5] COPY other/ /x", STEPS)  # another build's step
    assert not owned("mount / from exec /bin/sh -c make all", STEPS)
    assert not owned("cached mount /root/.cache/pip from exec /bin/sh -c pip install", STEPS)


def test_a_base_images_records_are_never_a_builds_own() -> None:
    """Another build on the same base may be using them at that moment (a concurrent prune
    of the FROM record failed the other build's export): never pruned, even when the step
    is this build's own."""
    steps = [*STEPS, "[1/5] FROM 127.0.0.1:5000/servelab/python-base@sha256:" + "0" * 64]
    assert not owned(steps[-1], steps)
    assert not owned("pulled from 127.0.0.1:5000/servelab/python-base@sha256:" + "0" * 64,
                     steps)
    assert not owned("[internal] load build definition from Dockerfile", steps)
    assert owned(STEPS[1], steps)  # its own COPY still is
