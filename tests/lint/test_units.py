"""Small pieces: variable substitution, shell splitting, .dockerignore matching, pins."""

from __future__ import annotations

import pytest

from servelab.image.ref import ImageRef
from servelab.lint import downloads, ignore, packages, shell, words
from servelab.lint.rules.secrets import looks_secret

SCOPE = {"A": "x", "EMPTY": "", "NONE": None}


def _lookup(name: str) -> str | None:
    return SCOPE.get(name)


@pytest.mark.parametrize(
    ("text", "value", "unresolved"),
    [
        ("$A/${A}", "x/x", []),
        ("${NONE}", "", ["NONE"]),
        ("${MISSING:-d}", "d", []),
        ("${EMPTY:-d}", "d", []),
        ("${EMPTY-d}", "", []),
        ("${A:+set}", "set", []),
        ("${NONE:+set}", "", []),
        ("${NONE:-${A}}", "x", []),
        ("${NONE:-${MISSING}}", "", ["MISSING"]),
        ("\\$A", "$A", []),
        ("${A:?}", "x", []),
        ("${NONE:?must be set}", "", ["NONE"]),
    ],
)
def test_expand(text: str, value: str, unresolved: list[str]) -> None:
    out = words.expand(text, _lookup)
    assert (out.value, out.unresolved) == (value, unresolved)


def test_expand_backtick_escape() -> None:
    assert words.expand("`$A", _lookup, "`").value == "$A"


@pytest.mark.parametrize(
    ("raw", "value"),
    [('"x y"', "x y"), ("'a\\b'", "a\\b"), ('"a\\"b"', 'a"b'), ("plain", "plain"), ('""', "")],
)
def test_unquote(raw: str, value: str) -> None:
    assert words.unquote(raw) == value


def test_shell_commands() -> None:
    text = (
        "set -e\n"
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y curl \\\n"
        "  ca-certificates > /dev/null 2>&1\n"
        "sudo -E python3 -m pip install flask | tee log  # comment\n"
        "exec tini -- bash -lc 'uv pip install x; echo done'\n"
    )
    cmds = shell.commands(text)
    assert [c.argv for c in cmds] == [
        ["set", "-e"],
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "curl", "ca-certificates"],
        ["pip", "install", "flask"],
        ["tee", "log"],
        ["pip", "install", "x"],
        ["echo", "done"],
    ]
    assert cmds[2].env == {"DEBIAN_FRONTEND": "noninteractive"}
    assert cmds[2].line == 2
    assert cmds[5].line == 5


def test_shell_unbalanced_quotes_fall_back() -> None:
    assert shell.commands("pip install 'flask")[0].argv[:2] == ["pip", "install"]


@pytest.mark.parametrize(
    ("patterns", "path", "out"),
    [
        (".git", ".git", True),
        (".git", ".git/config", True),
        ("*.safetensors", "model.safetensors", True),
        ("*.safetensors", "models/model.safetensors", False),  # * stays in one segment
        ("**/*.safetensors", "models/model.safetensors", True),
        ("**/*.safetensors", "model.safetensors", True),
        ("models", "models/a/b.bin", True),
        ("/models/", "models/a.bin", True),
        ("*\n!app.py", "app.py", False),
        ("*\n!app.py", ".git", True),
        ("models\n!models/keep.txt", "models/keep.txt", False),
        ("# comment\n\n", ".git", False),
        ("m?del[s]", "models", True),
        ("m[!a]dels", "models", True),
        ("weights/**", "weights/x/y.pt", True),
    ],
)
def test_dockerignore(patterns: str, path: str, out: bool) -> None:
    assert ignore.excluded(path, ignore.parse(patterns)) is out


@pytest.mark.parametrize(
    ("spec", "pinned"),
    [
        ("flask==3.0.3", True),
        ("uvicorn[standard]==0.30.1", True),
        ("flask", False),
        ("flask>=3", False),
        ("flask~=3.0", False),
        ("flask==3.*", False),
        ("./wheels/app.whl", True),
        (".", True),
        ("git+https://github.com/o/r@" + "a" * 40, True),
        ("git+https://github.com/o/r@main", False),
        ("https://example.org/pkg-1.0.tar.gz", True),
        ("${PKGS}", True),
    ],
)
def test_pip_spec(spec: str, pinned: bool) -> None:
    assert packages.pip_spec_pinned(spec) is pinned


def _cmd(text: str) -> shell.SimpleCommand:
    return shell.commands(text)[0]


def test_package_managers() -> None:
    none = lambda _p: None  # noqa: E731
    assert packages.pip_unpinned(_cmd("pip install -U pip setuptools==70.0.0"), none) == ["pip"]
    assert packages.pip_unpinned(_cmd("pip install -c constraints.txt flask"), none) == []
    assert packages.pip_unpinned(_cmd("pip install -i https://x/simple flask==1"), none) == []
    assert packages.pip_unpinned(_cmd("pip install -r req.txt"), lambda p: "a\nb==1\n") == ["a"]
    assert packages.apt_unpinned(_cmd("apt-get -o X=1 install -y a b=1 ./c.deb")) == ["a"]
    assert packages.apt_unpinned(_cmd("apt-get update")) == []
    assert packages.apk_unpinned(_cmd("apk add -t .deps a b=1 c~2")) == ["a"]
    assert packages.npm_unpinned(_cmd("npm i -g pm2@5 @scope/x@1.2.0 y z@latest"), False) == [
        "y",
        "z@latest",
    ]
    assert packages.npm_unpinned(_cmd("npm install"), True) == []
    assert packages.npm_unpinned(_cmd("npm ci"), False) == []


@pytest.mark.parametrize(
    ("path", "weights"),
    [
        ("model.safetensors", True),
        ("./models/", True),
        ("out/checkpoints", True),
        ("pytorch_model-00001-of-00002.bin", True),
        ("weights/x.bin", True),
        ("tools/app.bin", False),
        ("model.py", False),
        ("src/models.py", False),
        ("https://example.org/x/model.gguf?download=1", True),
        ("tokenizer.json", False),
    ],
)
def test_weight_paths(path: str, weights: bool) -> None:
    assert downloads.is_weight_path(path) is weights


def test_start_problems() -> None:
    env: dict[str, str] = {}
    found = downloads.start_problems(
        "curl -fsS http://127.0.0.1:8000/ready\n"
        "wget -q https://example.org/x\n"
        "python serve.py --model=org/model\n"
        "python -c 'from huggingface_hub import snapshot_download; snapshot_download(\"o/m\")'\n",
        env,
    )
    assert [(p.line, p.token) for p in found] == [
        (2, "https://example.org/x"),
        (3, "org/model"),
        (4, "snapshot_download"),
    ]
    assert downloads.start_problems("vllm serve org/m", {"HF_HUB_OFFLINE": "1"}) == []
    assert downloads.start_problems("export HF_HUB_OFFLINE=1\nvllm serve org/m", env) == []
    via_env = downloads.start_problems("vllm serve $M", {"M": "org/m"})
    assert [p.token for p in via_env] == ["org/m"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("OPENAI_API_KEY", True),
        ("DB_PASSWORD", True),
        ("MAX_NEW_TOKENS", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("HF_TOKEN_PATH", False),
        ("SECRET_FILE", False),
        ("KEYBOARD", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


@pytest.mark.parametrize(
    ("ref", "parts"),
    [
        ("python", ("python", None, None)),
        ("python:3.11", ("python", "3.11", None)),
        ("127.0.0.1:5000/x", ("127.0.0.1:5000/x", None, None)),
        ("127.0.0.1:5000/x:t@sha256:ab", ("127.0.0.1:5000/x", "t", "sha256:ab")),
    ],
)
def test_ref_parts(ref: str, parts: tuple[str, str | None, str | None]) -> None:
    assert ImageRef.split(ref) == parts
