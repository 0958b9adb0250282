"""The k8s-check rules; importing this package registers every one of them, in order."""

from servelab.k8s.rules import (
    gpu,
    hostpath,
    image,
    model_source,
    pod,
    probes,
    secrets,
    start,
    workload,
)

__all__ = ["gpu", "hostpath", "image", "model_source", "pod", "probes", "secrets", "start",
           "workload"]
