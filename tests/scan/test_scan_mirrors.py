"""DB mirrors tried in order, against the local registry (loopback only)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from scanfixtures import Image

import trivydb
from servelab.scan import stage as scan
from servelab.scan import trivy
from servelab.spec import ScanPolicy

REPO = "servelab-test/trivy-db"


@pytest.mark.registry
@pytest.mark.trivy
@pytest.mark.docker
def test_second_mirror_is_used_when_the_first_fails(
    registry: str, images: dict[str, Image], tmp_path: Path, trivy_bin: str
) -> None:
    trivydb.write_db(tmp_path / "source")
    trivydb.push_db(registry, REPO, tmp_path / "source")
    missing = f"{registry}/servelab-test/no-such-db:2"
    good = f"{registry}/{REPO}:2"
    s = scan.Scanner(ScanPolicy(db_repositories=[missing, good]),
                     cache_dir=tmp_path / "cache", offline=False)
    res = s.scan(images["control"].layout, out_dir=tmp_path / "out")
    assert res.db is not None and res.db.repository == good
    assert {f.id for f in res.findings} == set(images["control"].spec.expect)
    # the DB is now fresh: the next scanner downloads nothing
    again = scan.Scanner(ScanPolicy(db_repositories=[missing]), cache_dir=tmp_path / "cache")
    res2 = again.scan(images["treatment"].layout, out_dir=tmp_path / "out2")
    assert res2.db is not None and res2.db.repository == ""


def test_needs_download(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    assert trivy.needs_download(tmp_path, now)  # nothing there
    trivydb.write_db(tmp_path, next_update=now + timedelta(hours=1))
    assert not trivy.needs_download(tmp_path, now)
    trivydb.write_metadata(tmp_path, next_update=now - timedelta(hours=1))
    assert trivy.needs_download(tmp_path, now)
