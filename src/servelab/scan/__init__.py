"""servelab.scan: the scan stage, Trivy driven through :mod:`servelab.proc`.

* :mod:`~servelab.scan.trivy`: Trivy only: its DB (checked, aged, downloaded or not), running
  it offline-safe, parsing its JSON into :class:`TrivyReport`.
* :mod:`~servelab.scan.stage`: the stage: :class:`Scanner` (one scan per distinct digest),
  the gate (:func:`gate`, fails closed), the control comparison (:func:`compare`).
* :mod:`~servelab.scan.render`: its text, Markdown, JSON and SARIF (through the one SARIF
  writer in :mod:`servelab.report`).

The OCI input Trivy reads is prepared in :mod:`servelab.image.layout`. Names are imported on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.scan.stage import GateOutcome, ScanDiff, Scanner, ScanResult, compare, gate
    from servelab.scan.trivy import Trivy, TrivyConfig, TrivyReport, parse_report

_WHERE = {
    "Scanner": "stage", "ScanResult": "stage", "ScanDiff": "stage", "GateOutcome": "stage",
    "gate": "stage", "compare": "stage", "Trivy": "trivy", "TrivyConfig": "trivy",
    "TrivyReport": "trivy", "parse_report": "trivy",
}
__all__ = [
    "GateOutcome", "ScanDiff", "ScanResult", "Scanner", "Trivy", "TrivyConfig", "TrivyReport",
    "compare", "gate", "parse_report",
]
__getattr__ = lazy_exports(__name__, _WHERE)
