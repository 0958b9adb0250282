from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.docker
def test_doctor_reports_real_parts(docker_client: object) -> None:
    proc = subprocess.run([sys.executable, "-m", "servelab", "doctor", "--format", "json"],
                          capture_output=True, text=True, timeout=300, check=False)
    doc = json.loads(proc.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    for name in ("docker engine", "docker buildx", "OCI export + SOURCE_DATE_EPOCH", "trivy",
                 "hadolint"):
        assert checks[name]["ok"], checks[name]
    assert "2023-11-14T22:13:20" in checks["OCI export + SOURCE_DATE_EPOCH"]["detail"]
    ctd = checks["private containerd (cold pulls)"]
    if ctd["ok"]:
        assert "started in a temp dir and a private mount namespace" in ctd["detail"]
        assert ctd["detail"].startswith(("containerd 1.", "containerd 2."))
    else:
        assert ctd["fix"] and not ctd["required"], ctd
    # bootstrap installs docker-registry and openssl: the private registry starts for real
    reg = checks["private registry (--cold-start-registry private)"]
    assert reg["ok"] and "TLS on 127.0.0.1:" in reg["detail"], reg
    gpu = checks["GPU"]
    assert gpu["ok"] or "GPU unavailable" in gpu["detail"]
    assert proc.returncode == (0 if doc["ok"] else 3)


def test_doctor_without_docker_is_exit_3(tmp_path: object) -> None:
    env = {"PATH": "/nonexistent", "HOME": "/nonexistent",
           **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}
    proc = subprocess.run([sys.executable, "-m", "servelab", "doctor", "--no-build"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 3
    assert "fix:" in proc.stdout
    assert "Traceback" not in proc.stderr
    # no containerd on that PATH: the private containerd is a warning that names why
    assert "[warn] private containerd (cold pulls): `containerd` is not installed" in proc.stdout
    # nor a registry binary: a warning with how to install it
    assert ("[warn] private registry (--cold-start-registry private): required tool "
            "'docker-registry' was not found") in proc.stdout
    assert "apt-get install docker-registry openssl" in proc.stdout
