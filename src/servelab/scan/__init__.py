"""servelab.scan: the scan stage, Trivy driven through :mod:`servelab.proc`.

* :mod:`~servelab.scan.trivy`: Trivy only: its DB (checked, aged, downloaded or not), running
  it offline-safe, parsing its JSON into :class:`TrivyReport`.
* :mod:`~servelab.scan.result`: a scan's result (:class:`ScanResult`), the gate (:func:`gate`,
  fails closed), the control comparison (:func:`compare`), a stored result read back.
* :mod:`~servelab.scan.stage`: the stage: :class:`Scanner` (one scan per distinct digest) and
  the files it writes.
* :mod:`~servelab.scan.render`: its text, Markdown, JSON and SARIF (through the one SARIF
  writer in :mod:`servelab.report`).

The OCI input Trivy reads is prepared in :mod:`servelab.image.layout`. Names are imported on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.scan.result import GateOutcome, ScanDiff, ScanResult, compare, gate
    from servelab.scan.stage import Scanner
    from servelab.scan.trivy import Trivy, TrivyConfig, TrivyReport, parse_report

_WHERE = {
    "Scanner": "stage", "ScanResult": "result", "ScanDiff": "result", "GateOutcome": "result",
    "gate": "result", "compare": "result", "Trivy": "trivy", "TrivyConfig": "trivy",
    "TrivyReport": "trivy", "parse_report": "trivy",
}
__all__ = [
    "GateOutcome", "ScanDiff", "ScanResult", "Scanner", "Trivy", "TrivyConfig", "TrivyReport",
    "compare", "gate", "parse_report",
]
__getattr__ = lazy_exports(__name__, _WHERE)
