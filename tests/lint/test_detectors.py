"""The detectors behind issue 15's rules, on small inputs: unchecked downloads, branch
clones, package managers, secret names, weight files, Dockerfile names, pipes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from servelab.lint import (
    downloads,
    fetch,
    find_dockerfiles,
    is_dockerfile_name,
    packages,
    shell,
    walk,
)
from servelab.lint.rules.secrets import looks_secret

VALUES = {
    "GET_PIP_URL": "https://bootstrap.pypa.io/get-pip.py",
    "SCCACHE_URL": "https://github.com/mozilla/sccache/releases/download/v0.8.1/s.tar.gz",
    "GITHUB": "github.com",
    "VERSION": "0.5.5",
    "BRANCH": "gb200_blog_part_2",
}


def _unverified(text: str) -> list[str]:
    return [u.what for u in fetch.unverified_downloads(text, fetch.expander(VALUES.get, text))]


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("curl https://sh.rustup.rs -sSf | bash -s -- -y", "curl https://sh.rustup.rs | bash"),
        ("curl -sS ${GET_PIP_URL} | python${PYTHON_VERSION}", "get-pip.py | python${PYTHON"),
        ("wget -qO- https://x.example/install.sh | sudo bash", "wget https://x.example/ins"),
        ('sh -c "$(curl -fsSL https://x.example/tools/install.sh)" "" --unattended',
         "fed to a shell"),
        ("bash <(curl -s https://x.example/install.sh)", "fed to a shell"),
        ("curl -L -o s.tar.gz ${SCCACHE_URL} && tar xzf s.tar.gz", "an archive"),
        ("Z=protoc.zip && curl -OL https://${GITHUB}/p/releases/download/v1/$Z && unzip $Z",
         "https://github.com/p/releases/download/v1/protoc.zip"),
        ("curl -fsSL https://x.example/a.tar.gz | tar -xz", "an archive"),
        ("wget https://bootstrap.pypa.io/get-pip.py && python3 get-pip.py", "an installer"),
        ("curl -Lo /usr/local/bin/tool https://x.example/releases/download/v1/tool", "a program"),
        ("curl -L -o tool https://x.example/tool && chmod +x tool", "a program"),
        # a URL in a variable the RUN sets, inside a loop (gpustack's s6-overlay): the loop's
        # own variable stays as written, the rest is known
        ('base_url="https://github.com/o/s6/releases/download/v3"; for p in noarch x86_64; '
         'do wget -q -O "/tmp/s6-${p}.tar.xz" "${base_url}/s6-${p}.tar.xz"; done && '
         "tar -C / -Jxpf /tmp/s6-noarch.tar.xz",
         "https://github.com/o/s6/releases/download/v3/s6-${p}.tar.xz"),
    ],
)
def test_unverified_downloads_found(text: str, expect: str) -> None:
    found = _unverified(text)
    assert len(found) == 1, found
    assert expect in found[0]


@pytest.mark.parametrize(
    "text",
    [
        "curl -fsS http://127.0.0.1:8000/health",
        "curl -L https://x.example/key.gpg | gpg --dearmor > /etc/apt/keyrings/x.gpg",
        "curl -s https://api.github.com/repos/o/r/releases | python3 -c 'import json,sys'",
        "curl -o a.tgz https://x.example/a.tgz && echo '" + "ab" * 32 + "  a.tgz' | "
        "sha256sum -c - && tar xzf a.tgz",
        "curl -o a.sh https://x.example/a.sh && cosign verify-blob --key k a.sh && sh a.sh",
        "curl -s https://x.example/install.sh",
        "curl -fsSL -o /m/model.safetensors https://huggingface.co/o/m/resolve/main/model.safetensors",
        "curl -o /etc/apt/sources.list.d/x.list https://x.example/x.list",
    ],
)
def test_unverified_downloads_left_alone(text: str) -> None:
    assert _unverified(text) == []


def test_a_tag_is_mutable_as_an_image_tag_is() -> None:
    """Only a 40-hex commit is immutable: a clone at a tag (``--branch v1``, ``git checkout
    v1``, ``git reset --hard tags/b4500``) that is then built is reported as a tag."""
    found = fetch.branch_builds([(1, "git clone --branch v${VERSION} https://github.com/o/r "
                                     "&& cd r && make", "/src")],
                                lambda t: fetch.expander(VALUES.get, t))
    assert [(line, "at the tag v" in m and "mutable" in m) for line, m in found] == [(1, True)]
    assert _clones("git clone https://github.com/o/r && cd r && git checkout v1.2.0 "
                   "&& pip install .") == [1]
    assert _clones("git clone https://github.com/o/r", "cd r && git reset --hard tags/b4500",
                   "cd r && cmake -B build") == [1]
    assert _clones("git clone https://github.com/o/r && cd r && git checkout 0123abc "
                   "&& pip wheel -w /w .") == [1]


def _clones(*runs: str, workdir: str = "/src") -> list[int]:
    rows = [(n, text, workdir) for n, text in enumerate(runs, start=1)]
    return [line for line, _m in fetch.branch_builds(
        rows, lambda t: fetch.expander(VALUES.get, t))]


def test_branch_clone_then_build_is_found_once_where_it_was_cloned() -> None:
    assert _clones("git clone --depth=1 https://github.com/o/r.git",
                   "cd r && pip install -e .", "cd r && make") == [1]
    assert _clones("git clone https://github.com/o/d.git && cd d && git checkout ${BRANCH} "
                   "&& pip install .") == [1]
    assert _clones("git clone -b main https://github.com/o/r && cd r && cmake -B b") == [1]
    assert _clones("git clone https://github.com/o/r /opt/r", "pip install /opt/r") == [1]


def test_pinned_or_unbuilt_clones_are_fine() -> None:
    # a ref that still holds a variable no ARG sets is not judged
    assert _clones("git clone --branch v${NOT_SET} https://github.com/o/r && cd r && make") == []
    assert _clones("git clone --revision 0123456789abcdef0123456789abcdef01234567 "
                   "https://github.com/o/r && cd r && make") == []
    assert _clones("git clone https://github.com/o/r && cd r && git checkout "
                   "0123456789abcdef0123456789abcdef01234567 && pip install .") == []
    assert _clones("git clone https://github.com/o/plugin ~/.zsh/plugin && pip install x") == []
    assert _clones("git clone https://huggingface.co/o/m && cd m && make") == []


def test_pipes_are_recorded_between_simple_commands() -> None:
    cmds = shell.commands("curl -s u | sed s/a/b/ | bash -s && echo ok |& tee log")
    assert [(c.name, c.piped) for c in cmds] == [
        ("curl", True), ("sed", True), ("bash", False), ("echo", True), ("tee", False)]
    assert shell.commands("/opt/x/run.sh --flag")[0].argv[0] == "/opt/x/run.sh"
    assert shell.assignments("A=1 && export B=two C=3; D=4 cmd x=5") == {
        "A": "1", "B": "two", "C": "3", "D": "4"}


def _cmd(text: str) -> shell.SimpleCommand:
    return shell.commands(text)[0]


def test_more_package_managers() -> None:
    assert packages.pipx_unpinned(_cmd("pipx install poetry")) == ["poetry"]
    assert packages.pipx_unpinned(_cmd("pipx install --spec 'poetry==1.8.3' poetry")) == []
    assert packages.pipx_unpinned(_cmd("uv tool install ruff@0.6.9")) == []
    assert packages.rpm_unpinned(_cmd(
        "dnf -y install --setopt=tsflags=nodocs gcc python3.11-3.11.7 cuda-toolkit-12-4 "
        "libcudnn8-8.9.7.29-1.cuda12.2 @development ./x.rpm")) == ["gcc", "cuda-toolkit-12-4"]
    assert packages.rpm_unpinned(_cmd("yum install -y git")) == ["git"]
    assert packages.rpm_unpinned(_cmd("microdnf clean all")) == []
    assert packages.conda_unpinned(_cmd(
        "conda install -y -c nvidia python=3.10 pytorch==2.1.1 pytorch-cuda 'scipy>=1' "
        "conda-forge::x=1.0 'y=1.*'")) == ["pytorch-cuda", "scipy>=1", "y=1.*"]
    assert packages.conda_unpinned(_cmd("mamba install -y --file req.txt")) == []
    assert packages.conda_unpinned(_cmd("micromamba create -n e python=3.11 pip")) == ["pip"]


def test_pip_specs_around_variables_and_uv_options() -> None:
    assert packages.pip_spec_pinned("torch==${TORCH_VERSION}")
    assert not packages.pip_spec_pinned("bitsandbytes>=${BNB_VERSION}")
    assert packages.pip_spec_pinned("${PKGS}")
    none = lambda _p: None  # noqa: E731
    cmd = _cmd("uv pip install --system --torch-backend auto -p 3.11 --index-strategy "
               "unsafe-best-match vllm==0.9.0 accelerate")
    assert packages.pip_unpinned(cmd, none) == ["accelerate"]


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("SCCACHE_S3_NO_CREDENTIALS", "0", False),
        ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1", False),
        ("USE_AUTH_TOKEN", None, False),
        ("MAX_TOTAL_TOKENS", "4096", False),
        ("PASSWORD_MIN_LENGTH", "12", False),
        ("GITHUB_TOKEN", "false", False),
        ("HF_TOKEN", None, True),
        ("HF_TOKEN", "hf_abc123", True),
        ("AWS_SECRET_ACCESS_KEY", "wJalr", True),
        ("ACTIONS_RUNTIME_TOKEN", None, True),
    ],
)
def test_secret_names_and_values(name: str, value: str | None, secret: bool) -> None:
    assert looks_secret(name, value) is secret


def _safetensors(path: Path, payload: int = 16) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2],
                               "data_offsets": [0, payload]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(payload))


def test_weight_files_are_judged_by_content(tmp_path: Path) -> None:
    _safetensors(tmp_path / "model.safetensors")
    _safetensors(tmp_path / "weights.data")  # a safetensors header counts whatever the name
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + bytes(12))
    (tmp_path / "pytorch_model.bin").write_bytes(b"PK\x03\x04" + bytes(60))
    (tmp_path / "stub.safetensors").write_bytes(b"")  # a placeholder, not weights
    (tmp_path / "llama.py").write_text("class Llama: ...\n")
    (tmp_path / "big.pt").write_bytes(bytes(downloads.MIN_WEIGHT_BYTES))
    judged = {p.name: downloads.weight_file(p) is not None for p in tmp_path.iterdir()}
    assert judged == {"model.safetensors": True, "weights.data": True, "tiny.gguf": True,
                      "pytorch_model.bin": True, "stub.safetensors": False,
                      "llama.py": False, "big.pt": True}


def test_numpy_arrays_are_weights_only_when_large(tmp_path: Path) -> None:
    (tmp_path / "mtcnn_weights.npy").write_bytes(b"\x93NUMPY" + bytes(downloads.MIN_WEIGHT_BYTES))
    (tmp_path / "params.npz").write_bytes(b"PK\x03\x04" + bytes(downloads.MIN_WEIGHT_BYTES))
    (tmp_path / "mean.npy").write_bytes(b"\x93NUMPY" + bytes(4000))
    (tmp_path / "small.npz").write_bytes(b"PK\x03\x04" + bytes(60))  # a zip, but small
    judged = {p.name: downloads.weight_file(p) is not None for p in tmp_path.iterdir()}
    assert judged == {"mtcnn_weights.npy": True, "params.npz": True, "mean.npy": False,
                      "small.npz": False}
    assert not downloads.is_weight_path("data/embeddings.npy")  # by name alone, never


def test_weight_walk_honours_the_ignore_rules(tmp_path: Path) -> None:
    (tmp_path / "models" / "a").mkdir(parents=True)
    _safetensors(tmp_path / "models" / "a" / "model.safetensors")
    (tmp_path / "models" / "loader.py").write_text("x = 1\n")
    (tmp_path / "node_modules").mkdir()
    _safetensors(tmp_path / "node_modules" / "m.safetensors")
    size = (tmp_path / "models/a/model.safetensors").stat().st_size
    assert walk.weight_files(tmp_path, "models", lambda _r: False) == walk.Found(
        [("models/a/model.safetensors", size)], stopped=False)
    assert walk.weight_files(tmp_path, ".", lambda _r: False).files == [
        ("models/a/model.safetensors", size)]  # node_modules is never walked
    assert walk.weight_files(tmp_path, ".", lambda r: r.endswith(".safetensors")).files == []


def test_from_pretrained_of_a_local_path_is_no_download() -> None:
    assert downloads.build_weight_downloads('AutoModel.from_pretrained("/models/m")') == []
    assert downloads.build_weight_downloads("AutoModel.from_pretrained('org/m')") == [
        "from_pretrained()"]


NAMES = {
    "Dockerfile": True, "dockerfile": True, "Containerfile": True, "Dockerfile.cpu": True,
    "Dockerfile-cuda": True, "Dockerfile_amd": True, "cuda.Dockerfile": True,
    "server.dockerfile": True, "ubi.containerfile": True, "Containerfile.rocm": True,
    "Dockerfile.dockerignore": False, "Dockerfile.j2": False, "Dockerfile.template": False,
    "Dockerfile.in": False, "Dockerfile.md": False, "Dockerfiles": False, "README.md": False,
    "build_dockerfile.py": False, "dockerfile-gen.sh": False,
}


@pytest.mark.parametrize(("name", "found"), NAMES.items())
def test_dockerfile_names(name: str, found: bool) -> None:
    assert is_dockerfile_name(name) is found


def test_directory_mode_finds_every_name_teams_use(tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / "svc").mkdir(exist_ok=True)
        (tmp_path / "svc" / name).write_text("FROM scratch\n")
    found = sorted(Path(p).name for p, _d in find_dockerfiles([tmp_path]))
    assert found == sorted(n for n, ok in NAMES.items() if ok)


DIGEST = "9f" * 32
FINGERPRINT = "A035C8C19219BA821ECEA86B64E628F8D684696D"


def _verifies(text: str) -> bool:
    exp = fetch.expander({"TOOL_SHA256": DIGEST, "GPG_KEY": FINGERPRINT}.get, text)
    return fetch.verifies(shell.commands(text), text, exp)


@pytest.mark.parametrize(
    "text",
    [
        f"curl -fsSLO https://x.example/t.zip && echo '{DIGEST}  t.zip' | sha256sum -c -",
        'curl -fsSLO https://x.example/t.zip && echo "${TOOL_SHA256}  t.zip" | sha256sum -c -',
        f"curl -o t.zip https://x.example/t.zip && sha256sum t.zip | grep -q {DIGEST}",
        "curl -fsSLO https://x.example/t.zip && sha256sum -c /tmp/SHA256SUMS",
        'gpg --batch --keyserver hkps://keys.openpgp.org --recv-keys "$GPG_KEY" '
        "&& gpg --batch --verify t.zip.asc t.zip",
        "gpg --import /tmp/keys/release.asc && gpg --verify t.zip.asc t.zip",
        "cosign verify-blob --key cosign.pub --signature t.sig t.zip",
        "pip install --require-hashes -r requirements.txt",
    ],
)
def test_verification_needs_a_written_digest_or_key(text: str) -> None:
    assert _verifies(text)


@pytest.mark.parametrize(
    "text",
    [
        "apt-get install -y gnupg gpg-agent && curl -fsSLO https://x.example/t.deb",
        "curl -fsSLO https://x.example/t.zip && curl -fsSLO https://x.example/t.zip.sha256 "
        "&& sha256sum -c t.zip.sha256",
        "curl -fsSL https://x.example/key.asc | gpg --import && gpg --verify t.zip.asc t.zip",
        "curl -fsSL https://x.example/key.gpg | gpg --dearmor -o /usr/share/keyrings/x.gpg",
        "gpg --show-keys /usr/share/keyrings/x.gpg && curl -o t.run https://x.example/t.run",
        "curl -o t.zip https://x.example/t.zip && sha256sum t.zip > t.zip.sha256",
        'SUM="$(curl -fsSL https://x.example/t.zip.sha256)" && echo "$SUM  t.zip" | sha256sum -c -',
        "gpg --verify t.zip.asc t.zip",
    ],
)
def test_mentions_and_same_host_checks_are_no_verification(text: str) -> None:
    assert not _verifies(text)


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("git+https://github.com/o/r@main", "at the branch main"),
        ("git+https://github.com/o/r.git@v0.6.3#egg=r", "at the tag v0.6.3: a tag is mutable"),
        ("r @ git+https://github.com/o/r.git", "at its default branch"),
        ("git+ssh://git@github.com/o/r.git", "at its default branch"),
        ("https://x.example/r-1.0-py3-none-any.whl", "with no hash"),
        (f"git+https://github.com/o/r@{'a' * 40}", ""),
        (f"https://x.example/r-1.0-py3-none-any.whl#sha256={DIGEST}", ""),
        ("torch==2.5.1", ""),
        ("git+https://github.com/o/r@${REF}", ""),
    ],
)
def test_pip_requirements_from_urls_and_branches(spec: str, expect: str) -> None:
    cmd = shell.commands(f"pip install '{spec}'")[0]
    found = fetch.pip_unverified(cmd, lambda w: w)
    if expect:
        assert len(found) == 1 and expect in found[0]
    else:
        assert found == []


def _flow(*runs: str) -> list[tuple[int, str]]:
    return fetch.branch_builds([(n, t, "/") for n, t in enumerate(runs, start=1)],
                               lambda text: fetch.expander(VALUES.get, text))


def test_a_download_used_in_a_later_run_names_both_lines() -> None:
    [(line, what)] = _flow("curl -fsSL -o /opt/setup https://x.example/setup",
                           "chmod +x /opt/setup", "/opt/setup --yes")
    assert line == 1 and "at line 3" in what and "https://x.example/setup" in what
    assert _flow("curl -fsSL -o /opt/setup https://x.example/setup",
                 f"echo '{DIGEST}  /opt/setup' | sha256sum -c - && sh /opt/setup") == []
    assert _flow("curl -fsSL -o /opt/labels.txt https://x.example/labels.txt",
                 "wc -l /opt/labels.txt") == []
    [(line, what)] = _flow("curl -fsSL https://x.example/get > /tmp/get", "bash /tmp/get")
    assert line == 1 and "(bash, at line 2)" in what


def _same_host_keys(text: str) -> list[str]:
    cmds = shell.commands(text)
    exp = fetch.expander(VALUES.get, text)
    keys = fetch.key_downloads(cmds, text, exp)
    return [u.url for u in fetch.same_host_keys(fetch.apt_sources(cmds, exp), keys)]


def test_an_apt_key_from_the_repository_host_verifies_nothing() -> None:
    assert _same_host_keys(
        "curl -fsSL https://repo.example/key.gpg | gpg --dearmor -o /etc/apt/keyrings/r.gpg "
        "&& echo 'deb [signed-by=/etc/apt/keyrings/r.gpg] https://repo.example/deb stable "
        "main' > /etc/apt/sources.list.d/r.list") == ["https://repo.example/deb"]
    assert _same_host_keys(
        "wget -qO- https://repo.example/key.asc | apt-key add - && add-apt-repository "
        "'deb https://repo.example/ubuntu jammy main'") == ["https://repo.example/ubuntu"]


def test_apt_keys_checked_or_kept_elsewhere_are_fine() -> None:
    # the keyring of another repository, or another host's key
    assert _same_host_keys(
        "curl -fsSL https://repo.example/key.gpg | gpg --dearmor -o /etc/apt/keyrings/a.gpg "
        "&& echo 'deb [signed-by=/etc/apt/keyrings/b.gpg] https://repo.example/deb s m' "
        "> /etc/apt/sources.list.d/b.list") == []
    assert _same_host_keys(
        "curl -fsSL https://keys.example/key.gpg | gpg --dearmor -o /etc/apt/keyrings/r.gpg "
        "&& echo 'deb [signed-by=/etc/apt/keyrings/r.gpg] https://repo.example/deb s m' "
        "> /etc/apt/sources.list.d/r.list") == []
    # the fingerprint written out, compared before the key is trusted
    assert _same_host_keys(
        "curl -fsSL -o /tmp/k.asc https://repo.example/key.asc && gpg --show-keys "
        "--with-fingerprint /tmp/k.asc | grep -q 798AEC654E5C15428C8E42EEAA16FCBCA621E701 "
        "&& gpg --dearmor -o /etc/apt/keyrings/r.gpg /tmp/k.asc && echo 'deb "
        "[signed-by=/etc/apt/keyrings/r.gpg] https://repo.example/deb s m' > r.list") == []


def test_a_saved_key_dearmored_later_is_followed() -> None:
    text = ("curl -fsSL -o /tmp/k.asc https://repo.example/key.asc && gpg --dearmor -o "
            "/etc/apt/keyrings/r.gpg /tmp/k.asc && echo 'deb [signed-by=/etc/apt/keyrings/"
            "r.gpg] https://repo.example/deb s m' > r.list")
    assert _same_host_keys(text) == ["https://repo.example/deb"]
