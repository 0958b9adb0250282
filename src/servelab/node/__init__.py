"""servelab.node: how a node gets the image: registry push, the cold fetch and unpack, the
engine's warm-base pull, and what a node holding other images would pull. How the server then
starts and becomes ready is :mod:`servelab.smoke`.

* :mod:`~servelab.node.layers` (what is pulled), :mod:`~servelab.node.pull` (one pull's record),
  :mod:`~servelab.node.containerd` (a private containerd), :mod:`~servelab.node.coldpull` (the
  cold pull through it, checked cold), :mod:`~servelab.node.soci` (a private containerd with
  SOCI's snapshotter), :mod:`~servelab.node.lazypull` (the lazy pull, checked lazy, its bytes),
  :mod:`~servelab.node.fetch` (servelab's cold fetch and unpack, where no private containerd
  can run), :mod:`~servelab.node.engine`
  (the engine's pull, the push), :mod:`~servelab.node.start` (one repeat's figures),
  :mod:`~servelab.node.session` (a run's measurements).

API::

    with Cleanup(run_id) as cu:
        nodes = NodeStarts(NodeSettings(registry="127.0.0.1:5000"), run_id=run_id, cleanup=cu)
        node = nodes.measure("treatment", "servelab/run/treatment:abc@sha256:...",
                             bases=["127.0.0.1:5000/base:1@sha256:..."])
        node.cold        # PullRecord: a node holding none of the image's layers
        node.warm        # PullRecord: the engine's own pull with the base's layers held
        node.holds       # [NodeCost]: what a node holding the control / a base would pull
        smoke_image(image, settings, ..., node=node)   # the start, on the warm pull's timeline

Each distinct tested image is pushed once to the registry (``<registry>/servelab-coldstart/
<run>/<arm>``, its manifest deleted again at the end unless kept). Every layer's size comes
from the registry's manifest, so bytes are exact anywhere; seconds are this machine's (over
loopback they are not WAN seconds). Per repeat:

* **cold**: a fresh private containerd per repeat (:mod:`~servelab.node.coldpull`) pulls and
  unpacks the image, checked cold (empty root; with the registry's access log, every blob
  served in full): what a node with an empty image store does. Never the engine's own: on a
  shared engine the base's layers are held by other images and cannot be removed, so the
  engine could never pull it cold. Where no private containerd can run (not root, no
  ``containerd``), servelab fetches every blob into an empty directory (sha256 checked) and
  unpacks each layer there with ``tar``, in order, and says why.
* **lazy** (``--lazy soci``, :mod:`~servelab.node.lazypull`): the image's SOCI index built
  once and pushed beside it, then per repeat a fresh private containerd with
  soci-snapshotter-grpc pulls it lazily (the index discovered as a node does), checked lazy by
  the snapshotter's and the registry's logs; :meth:`NodeStarts.lazy_node` yields the running
  instance and its record for a start there.
* **warm-base**: the engine's own pull (Docker API, streamed progress) after servelab removed
  its names of the image, with the base images (``FROM``, or ``--node-has``) in the engine
  (pulled first when missing, removed at the end then). This run's other images (the other
  arm's, which may share layers) are set aside for the pull and pulled back after it. The
  progress events say, per layer, what was fetched (``Downloading``/``Download complete``) and
  what the engine already had (``Already exists``, or not listed when its snapshot existed); a
  fetched layer whose blob the content store still kept (``ctr content ls`` before the pull;
  a lease of an earlier operation keeps one) is counted as in the store, not downloaded. The
  unpack is taken from
  ``Extracting``/``Pull complete`` where the engine reports them (Docker 26's containerd
  store does not: then it is the time after the last download until the pull returned).

With the containerd image store, ``docker image rm`` of the last name of an image deletes it,
and the content and snapshots nothing else references are garbage collected at once; what is
still held (another image's layers, a running container's, blobs a lease keeps) is reported
as present or in the store, never as downloaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.node.coldpull import ColdCheck, ColdSettings, containerd_cold_pull
    from servelab.node.containerd import PrivateContainerd
    from servelab.node.ctrstart import CtrStart, CtrStartSpec, start_in
    from servelab.node.engine import content_store, engine_pull, push_archive
    from servelab.node.fetch import fetch_cold
    from servelab.node.layers import Blob, ImageLayers, NodeCost, read_layers
    from servelab.node.pull import COLD, WARM_BASE, LayerPull, PullRecord, layer_pulls, pull_record
    from servelab.node.session import NodeSettings, NodeStarts
    from servelab.node.start import NodeStart

_WHERE = {
    "Blob": "layers",
    "ImageLayers": "layers",
    "NodeCost": "layers",
    "read_layers": "layers",
    "COLD": "pull",
    "WARM_BASE": "pull",
    "LayerPull": "pull",
    "PullRecord": "pull",
    "layer_pulls": "pull",
    "pull_record": "pull",
    "fetch_cold": "fetch",
    "ColdCheck": "coldpull",
    "ColdSettings": "coldpull",
    "containerd_cold_pull": "coldpull",
    "PrivateContainerd": "containerd",
    "CtrStart": "ctrstart",
    "CtrStartSpec": "ctrstart",
    "start_in": "ctrstart",
    "NodeStart": "start",
    "NodeSettings": "session",
    "NodeStarts": "session",
    "content_store": "engine",
    "engine_pull": "engine",
    "push_archive": "engine",
}
__all__ = [
    "COLD",
    "WARM_BASE",
    "Blob",
    "ColdCheck",
    "ColdSettings",
    "CtrStart",
    "CtrStartSpec",
    "ImageLayers",
    "LayerPull",
    "NodeCost",
    "NodeSettings",
    "NodeStart",
    "NodeStarts",
    "PrivateContainerd",
    "PullRecord",
    "containerd_cold_pull",
    "content_store",
    "engine_pull",
    "fetch_cold",
    "layer_pulls",
    "pull_record",
    "push_archive",
    "read_layers",
    "start_in",
]
__getattr__ = lazy_exports(__name__, _WHERE)
