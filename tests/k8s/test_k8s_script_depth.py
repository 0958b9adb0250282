"""k8s-check follows the scripts a container runs k8s.script.MAX_DEPTH levels deep; a script
past that bound is a coverage note ("partly checked"), never a silent pass (issue 31 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.k8s import check_manifests
from servelab.k8s.script import MAX_DEPTH
from servelab.report import get_reporter

DEPLOY = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: launch}}
data:
{scripts}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: web@sha256:{digest}
          command: [sh, /scripts/s0.sh]
          volumeMounts:
            - {{name: scripts, mountPath: /scripts}}
      volumes:
        - {{name: scripts, configMap: {{name: launch}}}}
"""


def _chain(tmp_path: Path, levels: int) -> Path:
    """s0.sh runs s1.sh ... runs s<levels-1>.sh, whose last line installs at start."""
    lines = []
    for i in range(levels):
        body = (f"sh /scripts/s{i + 1}.sh" if i + 1 < levels
                else "pip install torch && exec python -m http.server")
        lines.append(f"  s{i}.sh: |\n    #!/bin/sh\n    {body}")
    path = tmp_path / "deploy.yaml"
    path.write_text(DEPLOY.format(scripts="\n".join(lines), digest="a" * 64))
    return path


def _start_installs(report: object) -> list[str]:
    return [f.message for f in report.findings  # type: ignore[attr-defined]
            if f.rule_id == "start-install"]


@pytest.mark.parametrize("levels", [MAX_DEPTH + 2, MAX_DEPTH + 4])
def test_a_script_past_the_depth_is_a_coverage_note(tmp_path: Path, levels: int) -> None:
    report = check_manifests([_chain(tmp_path, levels)])
    notes = [n for n in report.coverage if "MAX_DEPTH" in n.why]
    assert notes, report.coverage
    assert "container web" in notes[0].what and notes[0].file.endswith("deploy.yaml")
    assert not _start_installs(report)  # the install is past the bound: not seen ...
    text = get_reporter("text").render(report)
    assert "not fully checked" in text  # ... and never a silent pass


def test_a_chain_within_the_depth_is_read_and_says_nothing(tmp_path: Path) -> None:
    report = check_manifests([_chain(tmp_path, MAX_DEPTH)])
    assert not [n for n in report.coverage if "MAX_DEPTH" in n.why]
    assert _start_installs(report), "the install at the end of the chain is found"
