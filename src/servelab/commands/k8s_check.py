"""Pre-launch checks of the Kubernetes manifests of a GPU inference service.

Kubernetes showing Running says nothing about a loaded model. k8s-check reads the rendered
manifests (multi-document YAML, helm template or kustomize output, directories of them, or -
for standard input) and checks that the GPU request and limit, tolerations, node placement,
priority, probes, security context, model volume, /dev/shm, PodDisruptionBudget and rollout
strategy of the serving pods agree with each other, and that nothing is installed, cloned or
downloaded at start (sh -c scripts and ConfigMap launch scripts included).

Pods are read from Deployments, StatefulSets, ReplicaSets, DaemonSets, Pods, Jobs, CronJobs
and the serving custom resources: KServe InferenceService, ServingRuntime,
ClusterServingRuntime, LLMInferenceService(Config), KubeRay RayService, RayCluster, RayJob
(with the runtime_env in serveConfigV2 / runtimeEnvYAML), LeaderWorkerSet, Knative Service.
An InferenceService is judged merged with its ServingRuntime when that runtime is given, as
KServe merges them; a runtime given alone is checked when it runs a known GPU server. Fields
a pod gets from an object not given are noted as inherited; kinds k8s-check cannot read are
named in a note (exit 2 when nothing else is given).

With --image (a servelab run directory, an OCI archive or layout, an image in the local
engine or in a registry on 127.0.0.1; nothing is pulled), the scripts a container runs (its
command, or the image's ENTRYPOINT and CMD) are read from the image's layers and checked for
installs and model downloads at start.

With --result (a result.json of one repeat, or the summary.json of a run, repeatable), the
manifests are also checked against what the experiment measured: the image digest it tested,
its worst startup time (the startupProbe budget must exceed it times --startup-margin), the
health path and port, the GPU model and the image's CUDA version (driver floor).

The serving container is the one that requests a GPU, else the first one; --container
overrides. Workloads without a GPU are skipped when another workload has one (a Ray head is
still checked for image pinning, security context and secrets).

Rules: image-not-digest, image-digest-mismatch, image-provenance, gpu-limit, gpu-visibility,
gpu-toleration, gpu-placement, startup-probe-budget, probe-target, security-context,
host-path, plaintext-secret, model-mount, start-install, resources, shm, driver-compat,
disruption, priority, rollout, service-port (see docs/k8s-check.md).

Exit codes: 0 no finding at or above --fail-on; 1 findings at or above --fail-on (default
error); 2 bad input (unreadable or malformed YAML, a document that is not a Kubernetes
object, an empty input or only kinds k8s-check cannot read, an unreadable --result, an
unknown --container, an --image that is not on this machine). A file with only Secrets,
ConfigMaps or Services is valid input: its Secrets are checked and a note says no workload
was in it.

Examples:
  servelab k8s-check deploy/*.yaml
  helm template my-release chart/ | servelab k8s-check - --result summary.json -f sarif
  servelab k8s-check deploy/ --image servelab-out/run-20261201-101500
"""

from __future__ import annotations

import argparse

from servelab.commands._common import add_fail_on, add_format, emit


def _margin(text: str) -> float:
    from servelab.textio import finite_float

    try:
        value = finite_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}") from None
    if value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is below 1 (use e.g. 1.5)")
    if value > 1000.0:
        raise argparse.ArgumentTypeError(f"{text} is above 1000 (use e.g. 1.5)")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import input_path
    parser.add_argument(
        "manifests", type=input_path, nargs="+", metavar="MANIFEST",
        help="Kubernetes YAML files or directories (multi-document allowed); - reads stdin",
    )
    parser.add_argument(
        "--result", type=input_path, action="append", default=[], metavar="FILE",
        help="result.json or summary.json of an experiment run; repeatable",
    )
    parser.add_argument(
        "--startup-margin", type=_margin, default=1.5, metavar="FACTOR",
        help="the startupProbe budget must reach the worst measured startup times this "
        "(default: 1.5)",
    )
    parser.add_argument(
        "--container", metavar="NAME",
        help="the serving container (default: the one with a GPU, else the first)",
    )
    parser.add_argument(
        "--image", metavar="IMAGE",
        help="the serving image, available locally (a servelab run directory, an OCI archive "
        "or layout, an image in the local engine or in a registry on 127.0.0.1): the scripts "
        "the containers run are read from its layers",
    )
    add_format(parser)
    add_fail_on(parser)


def run(args: argparse.Namespace) -> int:
    from servelab.k8s import check_manifests
    from servelab.report import get_reporter

    report = check_manifests(
        args.manifests,
        result_paths=args.result,
        startup_margin=args.startup_margin,
        serving_container=args.container,
        image=args.image,
    )
    emit(get_reporter(args.format).render(report), args.output, args.format)
    return 1 if report.fails(args.fail_on) else 0
