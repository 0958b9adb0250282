"""``servelab doctor``: what this machine can do, each part tried for real, with a fix hint."""

from __future__ import annotations

import json
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from servelab import proc
from servelab.errors import ServelabError
from servelab.textio import write_file

#: the epoch the OCI probe build stamps; the check reads it back from the image config
PROBE_EPOCH = 1_700_000_000


@dataclass
class Check:
    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""


@dataclass
class DoctorResult:
    checks: list[Check] = field(default_factory=list)

    @property
    def missing_required(self) -> list[Check]:
        return [c for c in self.checks if c.required and not c.ok]

    def to_dict(self) -> dict[str, object]:
        return {"ok": not self.missing_required, "checks": [asdict(c) for c in self.checks]}


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def check_docker_client() -> Check:
    path = proc.which("docker")
    if path is None:
        hint = proc.INSTALL_HINTS["docker"]
        return Check("docker client", False, True, "not found on PATH", hint)
    return Check("docker client", True, True, path)


def check_engine() -> Check:
    try:
        import docker

        seconds = proc.deadline(proc.ENGINE_TIMEOUT_ENV, 10.0)
        client = docker.from_env(timeout=max(1, round(seconds)))
        try:
            info = client.version()
        finally:
            client.close()
    except Exception as e:  # the SDK raises many kinds; all mean "not reachable"
        return Check(
            "docker engine", False, True, f"not reachable: {_first_line(str(e))[:200]}",
            "start dockerd (scripts/bootstrap.sh does) or set DOCKER_HOST",
        )
    return Check("docker engine", True, True,
                 f"Docker {info.get('Version', '?')} (API {info.get('ApiVersion', '?')})")


def check_image_store() -> Check:
    try:
        out = proc.run(["docker", "info", "--format", "{{json .DriverStatus}}"],
                       timeout=proc.deadline(proc.ENGINE_TIMEOUT_ENV, 20.0))
    except ServelabError as e:
        return Check("containerd image store", False, False, e.message.splitlines()[0])
    store = "containerd" if "io.containerd.snapshotter" in out.stdout else "classic"
    ok = store == "containerd"
    return Check(
        "containerd image store", ok, False,
        f"{store} image store" + ("" if ok else ": loaded image IDs differ from manifest digests"),
        "" if ok else 'set {"features":{"containerd-snapshotter":true}} in daemon.json '
        "(servelab uses a docker-container builder otherwise)",
    )


def check_buildx() -> Check:
    try:
        out = proc.run(["docker", "buildx", "version"], timeout=30)
    except ServelabError as e:
        return Check("docker buildx", False, True, e.message.splitlines()[0],
                     "install the buildx plugin (Debian: apt-get install docker-buildx)")
    return Check("docker buildx", True, True, _first_line(out.stdout))


#: the build probe's check, named as `servelab doctor` prints it
OCI_CHECK = "OCI export + SOURCE_DATE_EPOCH"


def check_oci_export() -> Check:
    """Build a tiny image to an OCI archive as servelab's builds export (zstd, no
    rewrite-timestamp: servelab clamps the layers' times itself), and check that BuildKit
    stamped the config with SOURCE_DATE_EPOCH."""
    from servelab.build.builder import probe_created
    from servelab.build.export import output_option

    name = OCI_CHECK
    fix = ("use BuildKit >= 0.11 with the containerd image store or a docker-container builder; "
           "servelab build creates one when it can")
    with tempfile.TemporaryDirectory(prefix="servelab-doctor-") as tmp:
        ctx = Path(tmp)
        write_file(ctx / "f", "servelab doctor\n")
        write_file(ctx / "Dockerfile", "FROM scratch\nCOPY f /f\n")
        dest = ctx / "out.tar"
        try:
            proc.run(
                ["docker", "buildx", "build", "--no-cache", "--provenance=false",
                 "--output", output_option(dest, rewrite_timestamp=False), str(ctx)],
                timeout=180, env={"SOURCE_DATE_EPOCH": str(PROBE_EPOCH)},
            )
            created = probe_created(dest)
        except ServelabError as e:
            return Check(name, False, True, e.message.splitlines()[0], fix)
        except (OSError, KeyError, ValueError, tarfile.TarError) as e:
            return Check(name, False, True, f"unreadable OCI archive: {e}", fix)
    if created is None or not created.startswith("2023-11-14T22:13:20"):
        return Check(name, False, True,
                     f"SOURCE_DATE_EPOCH not applied (config created: {created})", fix)
    return Check(name, True, True, f"a test build stamped {created}")


def check_trivy() -> Check:
    try:
        out = proc.run(["trivy", "--version", "--format", "json"], timeout=60)
        data = json.loads(out.stdout)
    except ServelabError as e:
        return Check("trivy", False, True, e.message.splitlines()[0], proc.INSTALL_HINTS["trivy"])
    except json.JSONDecodeError:
        return Check("trivy", False, True, "unparseable 'trivy --version' output",
                     proc.INSTALL_HINTS["trivy"])
    db = data.get("VulnerabilityDB") or {}
    db_text = f", DB updated {db.get('UpdatedAt')}" if db else ", no vulnerability DB cached"
    return Check("trivy", True, True, f"Trivy {data.get('Version', '?')}{db_text}")


def _optional_tool(name: str, missing: str) -> Check:
    """``NAME --version`` answered (its first line), or *missing* with the install hint."""
    try:
        out = proc.run([name, "--version"], timeout=30)
    except ServelabError:
        return Check(name, False, False, missing, proc.INSTALL_HINTS[name])
    return Check(name, True, False, _first_line(out.stdout))


def check_hadolint() -> Check:
    return _optional_tool("hadolint", "not found (optional: lint runs without it)")


def check_git() -> Check:
    return _optional_tool("git", "not found (needed for SOURCE_DATE_EPOCH=commit)")


def check_gpu(required: bool) -> Check:
    from servelab.gpu import host_gpus

    info = host_gpus(require=False)
    if not info.available:
        return Check("GPU", False, required, f"GPU unavailable: {info.reason}",
                     proc.INSTALL_HINTS["nvidia-smi"] + " (only needed for GPU smoke tests)")
    names = "; ".join(f"GPU {g.index}: {g.name}" for g in info.gpus)
    return Check("GPU", True, required,
                 f"{names} (driver {info.driver_version}, CUDA {info.cuda_version})")


GPU_CONTAINERS_FIX = (
    "install the NVIDIA Container Toolkit, then either 'nvidia-ctk runtime configure "
    "--runtime=docker' and restart dockerd (for --gpus), or 'nvidia-ctk cdi generate "
    "--output=/etc/cdi/nvidia.yaml' (for CDI; Docker before 28 needs the cdi feature on)"
)


def check_gpu_containers(required: bool) -> Check:
    """Can the engine give a container a GPU: an NVIDIA CDI spec, or the --gpus runtime hook."""
    import shutil

    from servelab.smoke.gpu import cdi_gpu_specs

    name = "GPU in containers"
    try:
        # one JSON document a line (JSON escapes any newline inside a path)
        out = proc.run(["docker", "info", "--format",
                        "{{json .CDISpecDirs}}\n{{json .Runtimes}}"], timeout=20)
        dirs_text, _, runtimes_text = out.stdout.strip().partition("\n")
        dirs, runtimes = json.loads(dirs_text) or [], json.loads(runtimes_text) or {}
    except (ServelabError, ValueError) as e:
        return Check(name, False, required, f"cannot ask the engine: {_first_line(str(e))}")
    ways = [f"CDI: nvidia.com/gpu in {p}" for p in cdi_gpu_specs(list(dirs))[:1]]
    if "nvidia" in runtimes or shutil.which("nvidia-container-runtime-hook"):
        ways.append("--gpus: the NVIDIA runtime hook is installed")
    if ways:
        return Check(name, True, required, "; ".join(ways))
    where = ", ".join(dirs) if dirs else "CDI is off in this engine"
    return Check(name, False, required, "neither an NVIDIA CDI spec (CDI spec dirs: "
                 f"{where}) nor the NVIDIA runtime hook for --gpus", GPU_CONTAINERS_FIX)


CONTAINERD_FIX = ("cold pulls then use servelab's own fetch; for a node's runtime run servelab "
                  "as root with Debian's containerd (apt-get install containerd), see "
                  "docs/action.md (cold starts on GitHub-hosted runners)")


def check_private_containerd() -> Check:
    """Can a private containerd (the cold pulls' runtime) start here: tried for real."""
    from servelab.cleanup import new_run_id
    from servelab.node.containerd import PrivateContainerd, unavailable

    name = "private containerd (cold pulls)"
    why = unavailable()
    if why is not None:
        return Check(name, False, False, why, CONTAINERD_FIX)
    try:
        with PrivateContainerd(f"doctor-{new_run_id()}") as ctd:
            out = ctd.ctr("version", timeout=20).stdout
    except ServelabError as e:
        return Check(name, False, False, _first_line(e.message), CONTAINERD_FIX)
    version = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                    if ln.strip().startswith("Version:")), "?")
    return Check(name, True, False, f"containerd {version} started in a temp dir and a private "
                 "mount namespace, and stopped")


PRIVATE_REGISTRY_FIX = ("--cold-start-registry private then cannot run: install the "
                        "distribution registry and openssl (Debian: apt-get install "
                        "docker-registry openssl), or give --cold-start-registry HOST:PORT of "
                        "a registry you run")


def check_private_registry() -> Check:
    """Can ``--cold-start-registry private`` run here: its registry started for real, plain
    and TLS, on loopback ports, and removed."""
    from servelab.cleanup import new_run_id
    from servelab.node.ownregistry import PrivateRegistry

    name = "private registry (--cold-start-registry private)"
    try:
        with PrivateRegistry(f"doctor-{new_run_id()}", tls=True) as reg:
            where = f"{reg.plain}, TLS on {reg.secure}"
    except ServelabError as e:
        return Check(name, False, False, _first_line(e.message), PRIVATE_REGISTRY_FIX)
    return Check(name, True, False, f"started on {where} with its storage in a temp dir, "
                 "and removed")


LAZY_FIX = ("the lazy arm (--lazy soci) is then recorded as not measured: run servelab as root "
            "with /dev/fuse, fuse3 and soci-snapshotter (Debian 13: apt-get install -t trixie "
            "soci-snapshotter), see docs/run.md (lazy pulling)")


def check_lazy_pulling() -> Check:
    """Can the lazy arm run here: a private containerd with soci-snapshotter-grpc as its proxy
    snapshotter, started for real (no registry is contacted)."""
    from servelab.cleanup import new_run_id
    from servelab.node.soci import LazyRegistry, SociContainerd, lazy_unavailable

    name = "lazy pulling (SOCI)"
    why = lazy_unavailable()
    if why is not None:
        return Check(name, False, False, why, LAZY_FIX)
    try:
        with SociContainerd(f"doctor-{new_run_id()}", LazyRegistry("registry.invalid")) as pc:
            plugins = pc.ctr("plugins", "ls", timeout=20).stdout
            version = proc.run(["soci-snapshotter-grpc", "-version"], timeout=20).stdout
    except ServelabError as e:
        return Check(name, False, False, _first_line(e.message), LAZY_FIX)
    if not any(ln.split()[1:2] == ["soci"] and ln.split()[-1] == "ok"
               for ln in plugins.splitlines() if len(ln.split()) >= 3):
        return Check(name, False, False, "containerd did not load the proxy snapshotter soci",
                     LAZY_FIX)
    return Check(name, True, False, f"{_first_line(version) or 'soci-snapshotter-grpc'} "
                 "started as containerd's proxy snapshotter in a private mount namespace, and "
                 "stopped; the lazy registry must serve HTTPS (--lazy-registry, --registry-ca)")


def run_doctor(*, gpu_required: bool = False, build_probe: bool = True) -> DoctorResult:
    result = DoctorResult()
    result.checks.append(check_docker_client())
    if not result.checks[0].ok:
        for name in ("docker engine", "docker buildx", OCI_CHECK):
            result.checks.append(Check(name, False, True, "skipped: no docker client",
                                       proc.INSTALL_HINTS["docker"]))
    else:
        engine = check_engine()
        # an engine that did not answer is not asked again (each try would wait its deadline)
        store = check_image_store() if engine.ok else Check(
            "containerd image store", False, False, "skipped: the engine did not answer")
        result.checks += [engine, store, check_buildx()]
        engine_ok = result.checks[1].ok and result.checks[3].ok
        if build_probe and engine_ok:
            result.checks.append(check_oci_export())
        elif build_probe:
            result.checks.append(Check(OCI_CHECK, False, True,
                                       "skipped: no engine or buildx"))
    for step in (check_trivy, check_hadolint, check_git):
        result.checks.append(step())
    result.checks.append(check_private_containerd())
    result.checks.append(check_private_registry())
    result.checks.append(check_lazy_pulling())
    result.checks.append(check_gpu(gpu_required))
    if result.checks[0].ok and result.checks[1].ok:
        result.checks.append(check_gpu_containers(gpu_required))
    elif result.checks[0].ok:
        result.checks.append(Check("GPU in containers", False, gpu_required,
                                   "skipped: the engine did not answer"))
    return result


def render(result: DoctorResult, fmt: str = "text") -> str:
    """doctor's report: JSON, or one line per check with its fix and a closing line."""
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2) + "\n"
    lines = []
    for c in result.checks:
        mark = "ok  " if c.ok else ("FAIL" if c.required else "warn")
        lines.append(f"[{mark}] {c.name}: {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"       fix: {c.fix}")
    missing = result.missing_required
    lines.append("doctor: all required parts work" if not missing
                 else f"doctor: {len(missing)} required part(s) missing: "
                 + ", ".join(c.name for c in missing))
    return "\n".join(lines) + "\n"
