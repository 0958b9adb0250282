"""The engine's side of a pull: pushing the tested archive, the engine's own pull with its
progress events, and what its containerd content store still holds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab import logs, proc
from servelab.errors import CapabilityError, ServelabError
from servelab.image.ref import is_digest
from servelab.image.registry import RegistryClient
from servelab.node.layers import ImageLayers
from servelab.node.pull import WARM_BASE, PullRecord, pull_record

if TYPE_CHECKING:
    from servelab.image.push import PushResult


def _event_error(ev: dict[str, Any]) -> str | None:
    err = ev.get("error") or (ev.get("errorDetail") or {}).get("message")
    return str(err) if err else None


def push_archive(archive: Path, digest: str, arm: str, target: str, reg: RegistryClient, *,
                 mount_from: tuple[str, ...] = ()) -> PushResult:
    """Push manifest *digest* of the OCI *archive* to *target* (``.ref``:
    ``repository@digest``). Blobs already in the repositories *mount_from* are mounted, not
    sent again."""
    from servelab.image.push import TestedImage, push_tested

    return push_tested(TestedImage(arm, digest, archive, 1), target, client=reg,
                       mount_from=mount_from)


def _pull_events(client: Any, ref: str) -> list[tuple[float, dict[str, Any]]]:
    events: list[tuple[float, dict[str, Any]]] = []
    try:
        with logs.progress(f"engine pull of {ref}") as shown:
            for ev in client.api.pull(ref, stream=True, decode=True):
                events.append((time.monotonic(), ev))
                _show(shown, ev)
                err = _event_error(ev)
                if err:
                    raise CapabilityError(f"the engine could not pull {ref}: {err}",
                                          hint="check the registry runs and the engine may "
                                          "pull from it (insecure-registries for plain http)")
    except ServelabError:
        raise
    except Exception as e:
        raise CapabilityError(f"the engine could not pull {ref}: {e}") from e
    return events


def _show(shown: logs.Progress, ev: object) -> None:
    """An engine pull event on *shown*: a layer's first event is a step, the rest notes."""
    if not isinstance(ev, dict):
        return
    layer, status = str(ev.get("id") or ""), str(ev.get("status") or "")
    if status in ("Pulling fs layer", "Waiting", "Already exists"):
        shown.step(f"layer {layer}: {status}")
    elif layer and status:
        detail = ev.get("progressDetail") or {}
        cur, tot = (detail.get("current"), detail.get("total")) if isinstance(detail, dict) \
            else (None, None)
        amount = f" {logs.size(cur)} / {logs.size(tot)}" if isinstance(cur, int) and \
            isinstance(tot, int) and tot else ""
        shown.note(f"layer {layer}: {status}{amount}")


def pull_quietly(client: Any, ref: str) -> None:
    """The engine pulls *ref*; its progress is not timed."""
    _pull_events(client, ref)


#: where a Docker engine's containerd listens (its own, then a system one); namespace "moby"
CONTAINERD_SOCKETS = ("/var/run/docker/containerd/containerd.sock",
                      "/run/containerd/containerd.sock")


def content_store() -> frozenset[str] | None:
    """The blob digests in the engine's containerd content store (``ctr content ls``), or
    None when it cannot be read here (no ctr, no socket, not root, the classic store)."""
    if proc.which("ctr") is None:
        return None
    for sock in CONTAINERD_SOCKETS:
        if not Path(sock).exists():
            continue
        res = proc.run(["ctr", "--address", sock, "--namespace", "moby", "content", "ls",
                        "--quiet"], check=False, timeout=60)
        if res.returncode == 0:
            return frozenset(x for x in res.stdout.split() if is_digest(x))
    return None


def engine_pull(client: Any, ref: str, img: ImageLayers, holds: list[str]) -> PullRecord:
    """Pull *ref* (``host/repo@sha256:...``) through the engine and time it per layer; the
    content store is looked at first, so that a blob it kept is not counted as downloaded."""
    store = content_store()
    t0, w0 = time.monotonic(), time.time()
    events = _pull_events(client, ref)
    rec = pull_record(WARM_BASE, ref, img, holds, t0=t0, w0=w0, t_end=time.monotonic(),
                      events=events, in_store=store or frozenset())
    if store is None:
        rec.notes.append("the engine's content store could not be read (ctr): a layer whose "
                         "blob it still kept would count as downloaded")
    elif rec.bytes_in_store:
        n = sum(1 for x in rec.layers if x.in_store)
        rec.notes.append(f"{n} layer(s), {rec.bytes_in_store} bytes, were still in the "
                         "engine's content store though no image held them (a lease of an "
                         "earlier operation keeps them): the engine unpacked them without "
                         "downloading them; a node would download them")
    return rec
