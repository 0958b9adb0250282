"""servelab.smoke: the smoke stage, a hardened start of the image under test.

* :mod:`~servelab.smoke.stage`: :func:`smoke_image`: non-root, read-only root filesystem, no
  network, the model mounted read-only, everything labelled and removed.
* :mod:`~servelab.smoke.prober`: the long-lived prober in the container's network namespace:
  created, started, first accept, ready, first good request on one clock.
* :mod:`~servelab.smoke.result`: :class:`SmokeResult` and its settings;
  :mod:`~servelab.smoke.verdict`: the verdict decided from what a start observed;
  :mod:`~servelab.smoke.diagnose`: likely causes of a failed start (a new cause goes there).
* :mod:`~servelab.smoke.weights` (baked weights in layers), :mod:`~servelab.smoke.model`
  (model hashing), :mod:`~servelab.smoke.modelload` (bytes read before ready),
  :mod:`~servelab.smoke.gpu` and :mod:`~servelab.smoke.gpuphases` (GPU start and phases).
* :mod:`~servelab.smoke.render`: its text and Markdown.

How a node gets the image before this start (push, cold and warm-base pulls) is
:mod:`servelab.node`.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.smoke.diagnose import Diagnosis, diagnose
    from servelab.smoke.result import SmokeResult, SmokeSettings
    from servelab.smoke.stage import smoke_image
    from servelab.smoke.weights import WeightsReport, scan_image

_WHERE = {
    "smoke_image": "stage", "SmokeResult": "result", "SmokeSettings": "result",
    "Diagnosis": "diagnose", "diagnose": "diagnose", "WeightsReport": "weights",
    "scan_image": "weights",
}
__all__ = [
    "Diagnosis",
    "SmokeResult",
    "SmokeSettings",
    "WeightsReport",
    "diagnose",
    "scan_image",
    "smoke_image",
]
__getattr__ = lazy_exports(__name__, _WHERE)
