"""Benchmark: the image teams really ship, a vLLM serving image (9-10 GB), through a full
``servelab run`` and beside the bare tools.

The image is built from a wheelhouse that pip downloads once into a cache outside the
repository (``--wheelhouse``, default /var/tmp/servelab-vllm-wheels: ``pip download -d DIR
vllm==0.33.0`` with this venv's Python 3.11, so the wheels match the example's Debian 12
base). The generated Dockerfile installs them with the venv's own pip (copied into the
context: the base has none) from the local wheels only: ``--no-index --find-links`` and
``--require-hashes`` against a hash list computed from the wheelhouse; the build runs with
no network. The server imports what ``vllm serve`` imports before it touches a GPU (torch,
vllm, vllm.entrypoints.openai.api_server), prints the seconds each took, then answers
``GET /health``.

One ``servelab run`` (``--repeats``, every stage, the cold pull through a private containerd
and the lazy one through SOCI when this machine can), while a thread samples every
filesystem the run writes (statvfs: the engine's data root, TMPDIR with the private
registry's storage, --out) and servelab's progress lines say which stage runs. The registry is
servelab's own (``--cold-start-registry private``), removed with its blobs at the end. With
``--arms 2`` a control arm (the same image run as root) is built and measured beside the
treatment. It prints:

* peak extra disk by filesystem and by stage, what is left after the run, and the disk plan
  servelab made before building (docs/run.md, "Disk");
* seconds by stage from the results, beside the bare tools doing the same steps after the run
  (``docker buildx build --no-cache --load``; ``trivy image``; ``docker run`` until health
  answers; ``docker push``; ``ctr images pull`` into an empty private containerd and ``ctr
  run`` there until health answers, twice, the second after the page cache is dropped, as
  servelab's count of the bytes read before ready starts it again; the SOCI index and
  ``soci image rpull`` then ``ctr run --snapshotter soci`` until health answers; ``docker
  pull`` into the engine holding the base), and the wall ratio: the bare steps of a repeat
  times the repeats, and those servelab takes once per digest (scan, push, SOCI index) times
  the distinct digests;
* the start-up figures: pull to ready (full and lazy), bytes pulled, fetched and read before
  ready, and the import seconds the server printed.

    .venv/bin/python bench/real_image.py [--repeats 3] [--wheelhouse DIR]
    .venv/bin/python bench/real_image.py --quick   # a tiny wheel, one repeat: does it run?
    .venv/bin/python bench/real_image.py --quick --repeats 2 --no-bare  # do its builds reproduce?

The full run takes an hour or more on two cores and needs about 2U + 2C free (docs/run.md);
servelab refuses it before building when it does not fit.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import BIG_MARK, ROOT, base_image, machine, servelab_env

SETUP = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup"))
REGISTRY = os.environ.get("SERVELAB_REGISTRY", "127.0.0.1:5000")
TLS_REGISTRY = "127.0.0.1:5443"
WHEELHOUSE = Path("/var/tmp/servelab-vllm-wheels")
PACKAGE = "vllm==0.33.0"
IMPORTS = ["torch", "vllm", "vllm.entrypoints.openai.api_server"]
QUICK_MODULE = "servelab_quick_pkg"
GB = 1e9

DOCKERFILE = """FROM {base}
ENV PYTHONUNBUFFERED=1 HOME=/tmp XDG_CACHE_HOME=/tmp/.cache
# pip byte-compiles what it installs; with SOURCE_DATE_EPOCH set (servelab passes it) the
# .pyc are hash-based, else each holds its source's install time and no rebuild is the same
ARG SOURCE_DATE_EPOCH
RUN --mount=type=bind,source=.,target=/ctx \\
    BENCH={mark} PYTHONPATH=/ctx/tools python3 -m pip install --no-index --find-links /ctx/wheels \\
      --require-hashes --no-cache-dir --disable-pip-version-check --root-user-action=ignore \\
      --break-system-packages \\
      -r /ctx/requirements.txt
COPY server.py /opt/{mark}/server.py
USER 10001:10001
CMD ["python3", "/opt/{mark}/server.py"]
"""

SERVER = '''"""Imports what `vllm serve` imports before a GPU, then answers GET /health."""
import http.server
import importlib
import json
import os
import time

seconds = {{}}
for name in {imports!r}:
    t0 = time.monotonic()
    importlib.import_module(name)
    seconds[name] = round(time.monotonic() - t0, 3)
print(json.dumps({{"import_s": seconds}}), flush=True)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/health"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b"ok" if ok else b"")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8000"))),
                                Health).serve_forever()
'''

EXPERIMENT = """apiVersion: servelab/v1
kind: Experiment
metadata: {{name: real-image}}
spec:
  change: "{change}"
  metrics: [digest, size, startup, findings]
  repeats: {repeats}
  treatment: {{context: ctx, dockerfile: Dockerfile}}
{control}  serve: {{port: 8000, healthPath: /health, readinessTimeoutSeconds: 900,
          writablePaths: [/tmp], network: none}}
  scan: {{timeoutSeconds: 3600}}
  build: {{timeoutSeconds: 7200, sourceDateEpoch: 1700000000, network: none}}
"""


# ---------------------------------------------------------------------------- the wheels


def quick_wheel(d: Path) -> Path:
    """A tiny pure-Python wheel (the --quick stand-in for the 198 vLLM wheels)."""
    d.mkdir(parents=True, exist_ok=True)
    name, version = QUICK_MODULE, "1.0"
    files = {f"{name}/__init__.py": b"VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: servelab-bench\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()}"
        f",{len(b)}\n" for p, b in files.items())
    record += f"{name}-{version}.dist-info/RECORD,,\n"
    path = d / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, b in files.items():
            z.writestr(zipfile.ZipInfo(p, (2020, 1, 1, 0, 0, 0)), b)
        z.writestr(zipfile.ZipInfo(f"{name}-{version}.dist-info/RECORD", (2020, 1, 1, 0, 0, 0)),
                   record)
    return d


def wheelhouse(d: Path) -> Path:
    """The wheelhouse, downloaded once (network I/O only; kept for the next run)."""
    if not any(d.glob("*.whl")):
        d.mkdir(parents=True, exist_ok=True)
        print(f"downloading {PACKAGE} and its dependencies into {d} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(d), PACKAGE],
                       check=True, timeout=3600)
    return d


def requirements(wheels: Path) -> str:
    """Every wheel pinned by version and sha256 (pip --require-hashes)."""
    lines = []
    for w in sorted(wheels.glob("*.whl")):
        name, version = w.name.split("-")[:2]
        h = hashlib.sha256()
        with w.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        lines.append(f"{name}=={version} --hash=sha256:{h.hexdigest()}")
    return "\n".join(lines) + "\n"


#: ``--arms 2``: the control arm, the same image run as root (its Dockerfile without USER): one
#: change, in the config only, so both arms build the same layers
CONTROL = "  control: {context: ctx, dockerfile: Dockerfile.control}\n"


def context(tmp: Path, wheels: Path, imports: list[str], repeats: int, change: str, *,
            arms: int = 1) -> Path:
    """The experiment and its build context (wheels hard-linked, not copied)."""
    import pip

    ctx = tmp / "exp" / "ctx"
    (ctx / "wheels").mkdir(parents=True)
    for w in wheels.glob("*.whl"):
        try:
            os.link(w, ctx / "wheels" / w.name)
        except OSError:
            shutil.copy2(w, ctx / "wheels" / w.name)
    shutil.copytree(Path(pip.__file__).parent, ctx / "tools" / "pip",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "requirements.txt").write_text(requirements(wheels))
    (ctx / "server.py").write_text(SERVER.format(imports=imports))
    dockerfile = DOCKERFILE.format(base=base_image(), mark=BIG_MARK)
    (ctx / "Dockerfile").write_text(dockerfile)
    (ctx / "Dockerfile.control").write_text(
        "".join(ln for ln in dockerfile.splitlines(keepends=True) if not ln.startswith("USER ")))
    spec = tmp / "exp" / "experiment.yaml"
    spec.write_text(EXPERIMENT.format(repeats=repeats, change=change,
                                      control=CONTROL if arms > 1 else ""))
    return spec


# ---------------------------------------------------------------------------- disk


def device_io(where: dict[int, Path]) -> tuple[int, int]:
    """Bytes read and written so far on the block devices that hold *where*'s filesystems
    (/proc/diskstats: sectors of 512 bytes). Device-wide: every process's I/O counts, and a
    read the page cache serves is not a read; on a quiet machine it is the image's passes."""
    devs = {(os.major(d), os.minor(d)) for d in where}
    read = written = 0
    try:
        lines = Path("/proc/diskstats").read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        f = line.split()
        if len(f) >= 10 and (int(f[0]), int(f[1])) in devs:
            read += int(f[5]) * 512
            written += int(f[9]) * 512
    return read, written


class Sampler:
    """statvfs of each filesystem every *every_s*: the peak growth per (stage, filesystem)."""

    def __init__(self, paths: dict[str, Path], every_s: float = 0.5) -> None:
        self.fs: dict[int, str] = {}
        self.where: dict[int, Path] = {}
        for label, p in paths.items():
            q = p
            while not q.exists():
                q = q.parent
            dev = q.stat().st_dev
            self.fs[dev] = f"{self.fs[dev]}+{label}" if dev in self.fs else label
            self.where.setdefault(dev, q)
        self.start = self._used()
        self.stage = "start"
        self.peak: dict[tuple[str, str], int] = {}
        #: bytes read and written on the block devices under these filesystems, per stage
        self.io: dict[str, list[int]] = {}
        self._io_last = device_io(self.where)
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used(self) -> dict[int, int]:
        out = {}
        for dev, p in self.where.items():
            st = os.statvfs(p)
            out[dev] = (st.f_blocks - st.f_bfree) * st.f_frsize
        return out

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def sample(self) -> None:
        io = device_io(self.where)
        acc = self.io.setdefault(self.stage, [0, 0])
        acc[0] += io[0] - self._io_last[0]
        acc[1] += io[1] - self._io_last[1]
        self._io_last = io
        now = self._used()
        for dev, used in now.items():
            key = (self.stage, self.fs[dev])
            self.peak[key] = max(self.peak.get(key, 0), used - self.start[dev])

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def left(self) -> dict[str, int]:
        now = self._used()
        return {self.fs[d]: now[d] - self.start[d] for d in now}


def tree_bytes(path: Path) -> int:
    """The disk a directory tree holds (allocated blocks; links not followed)."""
    total = 0
    for d, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(d) / name).lstat().st_blocks * 512
    return total


STAGE_WORDS = (("lazy", "lazy pull"), ("cold start", "cold pull"), ("push", "push"),
               ("build", "build"), ("re-gzip", "build"), ("docker load", "load"),
               ("scan", "scan"), ("smoke", "smoke"), ("lint", "lint"))


def stage_of(line: str, current: str) -> str:
    text = line.removeprefix("servelab: ").strip().lower()
    for word, stage in STAGE_WORDS:
        if word in text:
            return stage
    return current


# ---------------------------------------------------------------------------- the run


def run_servelab(spec: Path, out: Path, repeats: int, sampler: Sampler, *, lazy: bool,
                 trivy_cache: Path) -> tuple[int, float]:
    argv = [sys.executable, "-m", "servelab", "run", str(spec), "--out", str(out),
            "--repeats", str(repeats), "--offline", "--trivy-cache-dir", str(trivy_cache),
            "--cold-start-registry", "private"]
    if lazy:
        argv += ["--lazy", "soci"]
    t0 = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=servelab_env())
    assert child.stderr is not None
    tail: list[str] = []
    for line in child.stderr:
        sampler.stage = stage_of(line, sampler.stage)
        tail = [*tail[-40:], line]
    child.wait()
    if child.returncode not in (0, 1):
        sys.stderr.write("".join(tail))
    return child.returncode, time.monotonic() - t0


#: a bare step: (seconds, bytes read, bytes written on the sampled devices)
Step = tuple[float, int, int]

#: the bare steps servelab takes once per distinct digest, not once per repeat (the scan, the
#: push and the SOCI index are shared by the repeats that built the same digest)
PER_DIGEST = ("scan", "push", "SOCI index")


def per_digest(name: str) -> bool:
    return name.startswith(PER_DIGEST)


def _step(where: dict[int, Path], fn: Any) -> Step:
    r0, w0 = device_io(where)
    t0 = time.monotonic()
    fn()
    took = time.monotonic() - t0
    r1, w1 = device_io(where)
    return took, r1 - r0, w1 - w0


def bare_tools(ctx: Path, trivy_cache: Path, where: dict[int, Path], *,
               lazy: bool) -> dict[str, Step]:
    """The same steps by the bare tools, once, after the run: seconds and bytes."""
    from servelab.build import cache as buildcache
    from servelab.scan.trivy import OFFLINE_FLAGS, QUIET_FLAGS

    out: dict[str, Step] = {}
    tag = f"servelab-bench/real-bare:{os.getpid()}"
    before = buildcache.cache_ids([]) or set()
    try:
        out["build + load (docker buildx build --load)"] = _step(where, lambda: subprocess.run(
            ["docker", "buildx", "build", "--no-cache", "--network", "none", "--load", "-t",
             tag, str(ctx)], check=True, capture_output=True, timeout=7200))
    finally:  # what the bare build left in BuildKit's cache (servelab prunes its own)
        now = buildcache.cache_records([]) or {}
        buildcache.prune_ids({i for i, d in now.items() if i not in before and (
            BIG_MARK in d or d.startswith("local source for "))}, [])
    try:
        trivy = shutil.which("trivy") or str(Path(sys.executable).with_name("trivy"))
        out["scan (trivy image --image-src docker)"] = _step(where, lambda: subprocess.run(
            [trivy, "image", *QUIET_FLAGS, *OFFLINE_FLAGS, "--cache-dir", str(trivy_cache),
             "--scanners", "vuln,secret", "--format", "json", "--output", os.devnull,
             "--image-src", "docker", tag], check=True, capture_output=True, timeout=3600))
        r0, w0 = device_io(where)
        start = bare_start(tag)
        r1, w1 = device_io(where)
        out["start to health (docker run)"] = (start, r1 - r0, w1 - w0)
        out.update(bare_node(tag, where, lazy=lazy))
    finally:
        subprocess.run(["docker", "rmi", "-f", tag, f"{REGISTRY}/{tag}"], capture_output=True,
                       check=False)
    return out


def bare_node(tag: str, where: dict[int, Path], *, lazy: bool) -> dict[str, Step]:
    """What a node does, by the bare CLIs: ``docker push``, then ``ctr images pull`` into an
    empty containerd, and with *lazy* the SOCI index (``ctr images pull``, ``soci create``,
    ``soci push``) and ``soci image rpull`` into an empty containerd with SOCI's
    snapshotter. The daemons are servelab's private instances, started before the clock
    (a node's daemon is already running); only the CLI calls are timed."""
    from servelab.cleanup import Cleanup
    from servelab.image.ref import ImageRef
    from servelab.image.registry import RegistryClient
    from servelab.node.containerd import PrivateContainerd, unavailable
    from servelab.node.soci import LazyRegistry, lazy_unavailable

    ref = f"{REGISTRY}/{tag}"
    subprocess.run(["docker", "tag", tag, ref], check=True, capture_output=True)
    out = {"push (docker push)": _step(where, lambda: subprocess.run(
        ["docker", "push", "-q", ref], check=True, capture_output=True, timeout=3600))}
    rid = f"bench-bare-{os.getpid()}"
    why = unavailable()
    if why is not None:  # as servelab's own run does: no private containerd here
        print(f"bare: no cold or lazy pull here: {why}", flush=True)
        return out
    try:
        with Cleanup(rid) as cu:
            cold = PrivateContainerd(f"{rid}-cold")
            cu.callback(cold.stop, f"private containerd {cold.work}")
            with cold:
                out["cold pull (ctr images pull)"] = _step(where, lambda: cold.ctr(
                    "images", "pull", "--plain-http", ref, timeout=3600))
                out["cold start to health (ctr run)"] = _step(
                    where, lambda: ctr_start(cold, ref))
                out["start again, page cache dropped (ctr run)"] = _step(
                    where, lambda: ctr_start(cold, ref, drop_caches=True))
            if lazy and lazy_unavailable() is None:
                out.update(bare_lazy(tag, where, rid, cu,
                                     LazyRegistry(TLS_REGISTRY, SETUP / "tls" / "ca.pem")))
        out["warm-base pull (docker pull)"] = warm_base_pull(tag, ref, where)
    finally:
        with contextlib.suppress(Exception):
            unpush(RegistryClient(), ImageRef.parse(ref))
    return out


def unpush(reg: Any, pushed: Any) -> None:
    """Delete what ``docker push`` put in the registry: with the containerd image store an
    index, its platform manifest and its attestation manifest, each a revision of its own
    that keeps its blobs from the registry's garbage collection until it is deleted too."""
    top = reg.get_manifest(pushed)
    children = [m["digest"] for m in json.loads(top.body).get("manifests") or []]
    reg.delete_manifest(pushed.with_digest(top.digest))
    for digest in children:
        with contextlib.suppress(Exception):
            reg.delete_manifest(pushed.with_digest(digest))


def bare_lazy(tag: str, where: dict[int, Path], rid: str, cu: Any,
              registry: Any) -> dict[str, Step]:
    from servelab.node.soci import SociContainerd

    ref = f"{TLS_REGISTRY}/{tag}"
    tls = registry.tls_args()
    out: dict[str, Step] = {}
    index = SociContainerd(f"{rid}-index", registry)
    cu.callback(index.stop, f"private containerd {index.work}")
    with index:
        out["SOCI index (ctr pull, soci create, soci push)"] = _step(where, lambda: (
            index.ctr("images", "pull", *tls, ref, timeout=3600),
            index.soci("create", ref, timeout=3600),
            index.soci("push", *tls, ref, timeout=3600)))
    node = SociContainerd(f"{rid}-lazy", registry)
    cu.callback(node.stop, f"private containerd {node.work}")
    with node:
        out["lazy pull (soci image rpull)"] = _step(where, lambda: node.soci(
            "image", "rpull", *tls, ref, timeout=3600))
        out["lazy start to health (ctr run --snapshotter soci)"] = _step(
            where, lambda: ctr_start(node, ref, snapshotter="soci"))
    return out


def warm_base_pull(tag: str, ref: str, where: dict[int, Path]) -> Step:
    """``docker pull`` of the pushed image into the engine that holds its base and nothing
    else of it (servelab's warm-base pull)."""
    subprocess.run(["docker", "rmi", "-f", tag, ref], check=True, capture_output=True)
    return _step(where, lambda: subprocess.run(["docker", "pull", "-q", ref], check=True,
                                               capture_output=True, timeout=3600))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_health(port: int, t0: float, timeout_s: float = 900.0) -> float:
    """Seconds from *t0* until ``GET /health`` on loopback *port* answers (NaN: never)."""
    import urllib.request

    while time.monotonic() - t0 < timeout_s:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return time.monotonic() - t0
        except OSError:
            time.sleep(0.1)
    return float("nan")


def ctr_start(pc: Any, ref: str, *, snapshotter: str | None = None,
              drop_caches: bool = False) -> float:
    """``ctr run`` of *ref* in the private containerd *pc* (host network, read-only root, a
    tmpfs /tmp) until its health answers; the task and container are removed after. With
    *drop_caches* the page cache is dropped first (``sync; echo 1 > drop_caches``, as root),
    as servelab's untimed start that counts the bytes read before ready evicts the image."""
    from servelab.node.containerd import remove_cgroups

    if drop_caches and os.geteuid() == 0:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    port, cid = free_port(), f"bare-{secrets.token_hex(4)}"
    snap = ["--snapshotter", snapshotter] if snapshotter else []
    t0 = time.monotonic()
    pc.ctr("run", "-d", "--net-host", "--null-io", "--read-only", *snap,
           "--runc-root", str(pc.work / "runc"), "--fifo-dir", str(pc.work / "fifo"),
           "--mount", "type=tmpfs,src=tmpfs,dst=/tmp,options=rw", "--env", f"PORT={port}",
           ref, cid, timeout=600)
    try:
        return wait_health(port, t0)
    finally:
        pc.ctr("task", "kill", "-s", "SIGKILL", cid, check=False)
        for _ in range(100):
            if pc.ctr("task", "delete", cid, check=False).returncode == 0:
                break
            time.sleep(0.1)
        pc.ctr("containers", "rm", cid, check=False)
        remove_cgroups(pc.namespace)




def bare_start(tag: str) -> float:
    t0 = time.monotonic()
    cid = subprocess.run(["docker", "run", "-d", "--read-only", "--tmpfs", "/tmp", "-p",
                          "127.0.0.1::8000", tag], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        port = subprocess.run(["docker", "port", cid, "8000/tcp"], check=True,
                              capture_output=True, text=True).stdout.split(":")[-1].strip()
        return wait_health(int(port), t0)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)


# ---------------------------------------------------------------------------- the report


def results_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*/repeat-*/result.json"))]


def stage_seconds(rows: list[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for r in rows:
        for name, st in (r.get("stages") or {}).items():
            if isinstance(st, dict) and st.get("seconds") is not None:
                total[name] = total.get(name, 0.0) + float(st["seconds"])
        rec = ((r.get("stages") or {}).get("build") or {}).get("record") or {}
        for key, label in (("build_s", "  buildx build"),
                           ("buildkit_export_s", "    of it, BuildKit's export"),
                           ("shape_s", "  re-gzip left after buildx exited"),
                           ("load_s", "  docker load")):
            if rec.get(key) is not None:
                total[label] = total.get(label, 0.0) + float(rec[key])
        shaping = (rec.get("export") or {}).get("seconds")
        if shaping is not None:  # it runs while BuildKit's export streams into its pipe
            label = "    of the export, servelab's re-gzip (streamed)"
            total[label] = total.get(label, 0.0) + float(shaping)
    return total


def startup(rows: list[dict[str, Any]], out: Path) -> list[str]:
    lines = []
    for r in rows:
        cs = (r.get("metrics") or {}).get("coldstart") or {}
        st = (r.get("metrics") or {}).get("startup") or {}
        lazy = cs.get("lazy") or {}
        rb = cs.get("read_before_ready") or {}
        lines.append(
            f"  {r['arm']} {r['repeat']}: engine start to ready {st.get('ready_s')} s | full "
            f"pull->ready {(cs.get('to_ready_s') or {}).get('cold')} s, pulled "
            f"{cs.get('image_bytes')} B, read before ready {rb.get('read_bytes')} B | lazy "
            f"pull->ready {(cs.get('to_ready_s') or {}).get('lazy')} s, fetched "
            f"{(lazy.get('bytes_fetched') or {}).get('total')} B, read "
            f"{(lazy.get('bytes_read') or {}).get('synchronous_bytes_served')} B")
    for log in sorted(out.glob("*/repeat-*/*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if '"import_s"' in line:
                lines.append(f"  imports ({log.parent.name}): {line.strip()}")
                break
    return lines


def print_plan(plan: dict[str, Any]) -> None:
    """The disk plan: the estimate before building (the peak it expects on each filesystem,
    to set beside the sampled peak) and, after the first build, what it still expected on top
    of what that build left."""
    before = plan.get("before_building") or plan
    print(f"disk plan before building ({before.get('source')}: U = "
          f"{before['uncompressed_bytes'] / GB:.2f} GB, C = {before['compressed_bytes'] / GB:.2f}"
          " GB): " + "; ".join(f"{n['label']} peak {n['bytes'] / GB:.2f} GB"
                               for n in before["needs"]))
    if plan is not before:
        print("disk plan after the first build (real U and C): " + "; ".join(
            f"{n['label']} {n['bytes'] / GB:.2f} GB more" for n in plan["needs"])
            + f" on top of {sum(plan.get('held_bytes', {}).values()) / GB:.2f} GB it left")


def print_reproducibility(summary: dict[str, Any]) -> None:
    """Each arm's reproducibility and the cause servelab named first: a build that does not
    reproduce keeps one archive and one set of registry blobs per digest (docs/run.md)."""
    for arm, r in (summary.get("reproducibility") or {}).items():
        if not isinstance(r, dict):
            continue
        first = (r.get("explanation") or [""])[0]
        print(f"{arm}: {r.get('summary')}" + (f"; first cause: {first}" if first else ""))


def report(sampler: Sampler, rows: list[dict[str, Any]], out: Path, wall: float) -> None:
    """servelab's figures, printed before the bare tools run (a long bench stopped during
    them keeps these)."""
    if rows:
        rec = ((rows[0].get("stages") or {}).get("build") or {}).get("record") or {}
        u, c = rec.get("uncompressed_size") or 0, rec.get("compressed_size") or 0
        print(f"image: U = {u / GB:.2f} GB uncompressed, C = {c / GB:.2f} GB compressed; "
              f"2U + 2C + 1 GB = {(2 * u + 2 * c + 1e9) / GB:.2f} GB")
    summary = out / "summary.json"
    if summary.is_file():
        plan = json.loads(summary.read_text()).get("disk_plan")
        if plan:
            print_plan(plan)
    print("peak extra disk by stage and filesystem:")
    for (stage, fs), peak in sorted(sampler.peak.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:10} {fs:28} {peak / GB:7.2f} GB")
    whole: dict[str, int] = {}
    for (_stage, fs), peak in sampler.peak.items():
        whole[fs] = max(whole.get(fs, 0), peak)
    print("peak extra disk by filesystem: " + ", ".join(
        f"{fs} {v / GB:.2f} GB" for fs, v in whole.items()))
    print("left after the run: " + ", ".join(
        f"{fs} {v / GB:+.2f} GB" for fs, v in sampler.left().items()))
    print(f"  of it: the run directory {tree_bytes(out) / GB:.2f} GB (images/ "
          f"{tree_bytes(out / 'images') / GB:.2f} GB); the private registry's storage went "
          "with it")
    if summary.is_file():
        print_reproducibility(json.loads(summary.read_text()))
    print(f"servelab run wall time: {wall:.1f} s")
    print("seconds by stage (servelab, all repeats):")
    for name, sec in stage_seconds(rows).items():
        print(f"  {name:18} {sec:9.1f} s")
    cleanup = (json.loads(summary.read_text()).get("cleanup_s") if summary.is_file() else None)
    if cleanup is not None:
        print(f"  {'clean-up (end)':18} {cleanup:9.1f} s")
    print("bytes read / written on the sampled devices by stage (servelab, all repeats; "
          "page-cache hits are not reads):")
    for stage, (rd, wr) in sampler.io.items():
        print(f"  {stage:10} read {rd / GB:7.2f} GB, written {wr / GB:7.2f} GB")
    print("start-up figures:")
    for line in startup(rows, out):
        print(line)
    sys.stdout.flush()


def report_bare(bare: dict[str, Step], wall: float, repeats: int, digests: int) -> None:
    """The bare steps, and the wall ratio: servelab's run against the bare steps it takes,
    those of a repeat times the repeats and those of a digest (scan, push, SOCI index) times
    the distinct digests, as servelab shares them."""
    print("the bare tools, one run each, after servelab's run ([d]: once per distinct digest, "
          "else once per repeat):")
    for name, (sec, rd, wr) in bare.items():
        mark = "[d]" if per_digest(name) else "   "
        print(f"  bare {mark} {name:50} {sec:9.1f} s, read {rd / GB:6.2f} GB, "
              f"written {wr / GB:6.2f} GB")
    each = sum(sec for name, (sec, _, _) in bare.items() if not per_digest(name))
    once = sum(sec for name, (sec, _, _) in bare.items() if per_digest(name))
    bare_s = each * repeats + once * digests
    if bare_s and repeats:
        print(f"wall: servelab {wall:.0f} s for {repeats} repeat(s) of {digests} digest(s) "
              f"against the bare tools' {each:.0f} s x {repeats} + {once:.0f} s x {digests} = "
              f"{bare_s:.0f} s (ratio {wall / bare_s:.2f}; the bare steps: "
              + ", ".join(name.split(" (")[0] for name in bare) + ")")


def digests_of(rows: list[dict[str, Any]]) -> int:
    """The distinct images the run built (its results' manifest digests)."""
    seen = set()
    for r in rows:
        rec = ((r.get("stages") or {}).get("build") or {}).get("record") or {}
        for p in rec.get("platforms") or []:
            seen.add(p.get("manifest_digest"))
    return len(seen - {None}) or 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=None,
                    help="repeats of the run (default 3; 1 with --quick)")
    ap.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE)
    ap.add_argument("--arms", type=int, choices=(1, 2), default=1,
                    help="2: a control arm beside the treatment (the same image run as root)")
    ap.add_argument("--no-lazy", action="store_true", help="no lazy pulls (SOCI)")
    ap.add_argument("--no-bare", action="store_true", help="skip the bare tools")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny wheel and one repeat: checks the script, not figures")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import trivydb

    tmp = Path(tempfile.mkdtemp(prefix="servelab-bench-real-"))
    try:
        cache = tmp / "trivy"
        trivydb.write_db(cache, trivydb.FIXTURE_ADVISORIES)
        if a.quick:
            wheels, imports = quick_wheel(tmp / "wheels"), [QUICK_MODULE]
            repeats = max(1, a.repeats or 1)
        else:
            wheels, imports, repeats = wheelhouse(a.wheelhouse), IMPORTS, max(1, a.repeats or 3)
        change = f"{PACKAGE} from a local wheelhouse" if not a.quick else "quick"
        spec = context(tmp, wheels, imports, repeats, change, arms=a.arms)
        out = tmp / "out"
        root = subprocess.run(["docker", "info", "--format", "{{.DockerRootDir}}"],
                              capture_output=True, text=True, check=False).stdout.strip()
        paths = {"out": out, "tmp": Path(servelab_env().get("TMPDIR") or tempfile.gettempdir())}
        if root:
            paths["engine"] = Path(root)
        print(f"start: {machine()}", flush=True)
        lazy = not a.no_lazy and not a.quick
        with Sampler(paths) as sampler:
            rc, wall = run_servelab(spec, out, repeats, sampler, lazy=lazy, trivy_cache=cache)
        rows = results_of(out)
        report(sampler, rows, out, wall)
        if not a.no_bare:
            report_bare(bare_tools(spec.parent / "ctx", cache, sampler.where, lazy=lazy), wall,
                        len(rows), digests_of(rows))
        print(f"end: {machine()}; servelab run exit {rc}")
        return 0 if rc in (0, 1) else rc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
