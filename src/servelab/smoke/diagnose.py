"""Why a smoke run failed: the likely cause, from the exit state and the container's last logs.

API: :func:`diagnose(lines, exit_code=..., oom_killed=..., ...) -> Diagnosis | None` and
:data:`CAUSES` (id -> :class:`Cause`, documented in docs/smoke.md).

Causes are tried in the order of :data:`CAUSES`; the first whose pattern matches a log line
(newest lines first) wins, with that line as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    fix: str
    pattern: re.Pattern[str] | None = None


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)


_CAUSES: list[Cause] = [
    Cause(
        "out-of-memory",
        "the kernel killed the container for using more memory than allowed (OOMKilled)",
        "give the container more memory, or load a smaller model / fewer workers",
    ),
    # The engine's own errors when it starts a container with GPUs: first, because the
    # runtime hook's refusal also reads "OCI runtime create failed" (bad-entrypoint).
    Cause(
        "gpu-runtime-missing",
        "the engine cannot give the container a GPU: it has no NVIDIA runtime hook (for "
        "--gpus) or no CDI spec for nvidia.com/gpu (for --device nvidia.com/gpu=...)",
        "install the NVIDIA Container Toolkit; for --gpus run 'nvidia-ctk runtime configure "
        "--runtime=docker' and restart dockerd; for CDI run 'nvidia-ctk cdi generate "
        "--output=/etc/cdi/nvidia.yaml' (Docker before 28 also needs the cdi feature on); "
        "gpu.mode in the spec picks legacy or cdi",
        _rx(r"could not select device driver \"[^\"]*\" with capabilities",
            r"unresolvable CDI devices", r"CDI device injection failed",
            r"unknown or invalid runtime name: nvidia"),
    ),
    Cause(
        "gpu-requirement-refused",
        "the NVIDIA runtime hook refused the image: this host does not meet its "
        "NVIDIA_REQUIRE_* (CUDA version, driver, brand or architecture)",
        "update the host's driver, or use an image whose CUDA this driver supports; the GPU "
        "check before the start names the failing condition",
        _rx(r"nvidia-container-cli: requirement error", r"unsatisfied condition: "),
    ),
    Cause(
        "gpu-driver-unusable",
        "the NVIDIA driver could not be used to set up the container's GPUs",
        "check that nvidia-smi works on the host; after a driver upgrade reload the kernel "
        "module or reboot (a driver/library version mismatch)",
        _rx(r"nvidia-container-cli: (initialization|detection) error",
            r"nvml error: driver not loaded", r"driver/library version mismatch",
            r"failed to initialize NVML"),
    ),
    Cause(
        "read-only-write",
        "it writes into the read-only root filesystem at start",
        "write caches and temp files under a path listed in serve.writablePaths (a tmpfs, "
        "e.g. /tmp), or set the library's cache directory there (HF_HOME, XDG_CACHE_HOME, "
        "TRANSFORMERS_CACHE, NUMBA_CACHE_DIR, MPLCONFIGDIR)",
        _rx(r"read-only file system", r"\bEROFS\b", r"\[Errno 30\]"),
    ),
    Cause(
        "model-mismatch",
        "the model it found is not the one it expects (sha256/checksum mismatch)",
        "mount the model whose sha256 the server (and model.sha256) expects",
        _rx(r"(sha-?256|checksum|hash|digest)[^\n]{0,40}(mismatch|does not match|differ)",
            r"(mismatch|does not match)[^\n]{0,40}(sha-?256|checksum|hash|digest)"),
    ),
    Cause(
        "permission-denied",
        "permission denied while running as a non-root user",
        "make the files the server reads readable by its uid (COPY --chown or chmod in the "
        "Dockerfile) and let it write only under serve.writablePaths",
        _rx(r"permission denied", r"\[Errno 13\]", r"\bEACCES\b", r"operation not permitted"),
    ),
    Cause(
        "model-missing",
        "the model file it loads is not where it looks for it",
        "mount the model at the path the server reads (model.mountPath, or the server's "
        "MODEL_DIR-like setting), and check the file names",
        _rx(r"model[^\n]{0,80}(not found|no such file|cannot be read|missing|does not exist)",
            r"(no such file or directory|not found|FileNotFoundError)[^\n]{0,120}"
            r"/models?\b"),
    ),
    Cause(
        "download-attempt",
        "it tries to download something at start (DNS or connection errors with no network)",
        "put everything the server needs into the image (code, packages) or the mounted "
        "model (weights, tokenizer, config), and turn off downloads at start (e.g. "
        "HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1)",
        _rx(r"temporary failure in name resolution", r"name or service not known",
            r"could not resolve host", r"getaddrinfo", r"nodename nor servname",
            r"network is unreachable", r"failed to establish a new connection",
            r"max retries exceeded", r"\[Errno -[23]\]", r"\[Errno 101\]",
            r"connection (refused|reset)[^\n]{0,80}(https?://|huggingface|pypi)",
            r"urlopen error", r"LocalEntryNotFoundError", r"offline mode is enabled",
            r"dial tcp: lookup"),
    ),
    Cause(
        "shm-too-small",
        "shared memory (/dev/shm) ran out",
        "raise serve.shmSize (e.g. 1g or more for inference servers and NCCL)",
        _rx(r"/dev/shm[^\n]{0,80}(no space left|too small)",  # noqa: S108
            r"(no space left|insufficient)[^\n]{0,80}shared memory", r"\bbus error\b",
            r"NCCL[^\n]{0,80}shm"),
    ),
    Cause(
        "bad-entrypoint",
        "the engine could not run the image's command",
        "check the image's ENTRYPOINT/CMD and serve.args, and that the executable exists",
        _rx(r"executable file not found", r"exec format error",
            r"exec: \"[^\"]+\": stat .*no such file", r"OCI runtime (create|exec) failed"),
    ),
    Cause(
        "port-in-use",
        "the port is already in use inside the container",
        "make the server listen on serve.port only once",
        _rx(r"address already in use", r"\[Errno 98\]", r"EADDRINUSE"),
    ),
]
CAUSES: dict[str, Cause] = {c.id: c for c in _CAUSES}
#: exit codes that name a signal (128 + n) and what they mean
SIGNALS = {134: "SIGABRT (abort)", 137: "SIGKILL", 139: "SIGSEGV (segmentation fault)",
           143: "SIGTERM"}


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    title: str
    fix: str
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "title": self.title, "fix": self.fix,
                "evidence": self.evidence}


def _missing_under(mount_path: str | None) -> re.Pattern[str] | None:
    if not mount_path or mount_path == "/":
        return None
    return _rx(r"(no such file or directory|not found|FileNotFoundError|does not exist)"
               r"[^\n]{0,160}" + re.escape(mount_path.rstrip("/")))


def _make(cause_id: str, evidence: str | None) -> Diagnosis:
    c = CAUSES[cause_id]
    return Diagnosis(c.id, c.title, c.fix, evidence)


def diagnose(
    lines: Sequence[str],
    *,
    exit_code: int | None = None,
    oom_killed: bool = False,
    non_root: bool = True,
    mount_path: str | None = None,
    extra: Sequence[str] = (),
) -> Diagnosis | None:
    """The likely cause of a failed start, or None when nothing is recognisable.

    *lines* are the container's log lines (oldest first); *extra* other text to search (the
    engine's error when the start itself failed, the prober's last answer).
    """
    if oom_killed:
        return _make("out-of-memory", f"OOMKilled, exit code {exit_code}")
    texts = [*extra, *reversed(lines)]
    missing = _missing_under(mount_path)
    for cause in _CAUSES:
        if cause.id == "model-missing" and missing is not None:
            hit = next((t for t in texts if missing.search(t)), None)
            if hit is not None:
                return _make(cause.id, hit.strip()[:300])
        if cause.pattern is None:
            continue
        if cause.id == "permission-denied" and not non_root:
            continue
        for text in texts:
            if cause.pattern.search(text):
                return _make(cause.id, text.strip()[:300])
    if exit_code in SIGNALS:
        return Diagnosis(
            f"signal-{exit_code - 128}", f"the process died from {SIGNALS[exit_code]}",
            "read the logs above; a native crash or an external kill", None,
        )
    return None
