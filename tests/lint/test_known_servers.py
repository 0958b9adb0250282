"""Known model servers in lint's catalogue (KoboldCpp, Coqui TTS) and FROM lines that a
build argument leaves open: what startup-download, no-health, root-user and arg-unresolved
say of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.lint import LintConfig, catalogue, downloads, lint_paths

PINNED = ("python:3.11.10-slim@sha256:"
          "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1")


@pytest.mark.parametrize("line", [
    "/app/koboldcpp-linux-x64-cuda1210 --model https://h.example/x.Q4_K_M.gguf --port 5001",
    "koboldcpp --hf acme/tiny-GGUF",
    "python3 /opt/koboldcpp.py --model acme/tiny-GGUF --port 5001",
    "koboldcpp --model=https://h.example/a.gguf",
    "koboldcpp --model /m/a.gguf --sdmodel https://h.example/sd.safetensors",
    "koboldcpp --config https://h.example/preset.kcpps",
    "HF_HUB_OFFLINE=1 koboldcpp --model https://h.example/a.gguf",
])
def test_koboldcpp_given_a_url_or_hub_id_downloads_at_start(line: str) -> None:
    problems = downloads.start_problems(line, {})
    assert len(problems) == 1 and "KoboldCpp" in problems[0].what, problems


@pytest.mark.parametrize("line", [
    "koboldcpp --model /models/a.gguf --port 5001",
    "python koboldcpp.py --model models/a.gguf",
    "koboldcpp --model http://127.0.0.1:8080/a.gguf",
    "koboldcpp --contextsize 4096 --port 5001 --host 0.0.0.0",
    "python kobold_client.py --model acme/tiny",  # not KoboldCpp: judged as any program
])
def test_koboldcpp_with_local_files_is_no_download(line: str) -> None:
    problems = downloads.start_problems(line, {"HF_HUB_OFFLINE": "1"})
    assert problems == []


def test_koboldcpp_program_names() -> None:
    assert downloads.known_server_program("/app/koboldcpp-linux-x64-cuda1210")
    assert downloads.known_server_program("koboldcpp.py")
    assert not downloads.known_server_program("kobold_client.py")
    assert not downloads.known_server_program("llama-server.sh")


def test_coqui_forms_come_from_the_catalogue() -> None:
    assert set(catalogue.COQUI_PROGRAMS) == {"tts", "tts-server"}
    assert "TTS.server.server" in catalogue.COQUI_MODULES
    found = downloads.start_problems(
        "python -m TTS.server.server --model_name tts_models/en/vctk/vits", {})
    assert len(found) == 1 and "Coqui TTS" in found[0].what
    assert downloads.start_problems("tts-server --model_path /m/model.pth", {}) == []


def _lint(tmp_path: Path, text: str) -> list[tuple[str, int, str, str]]:
    df = tmp_path / "Dockerfile"
    df.write_text(text)
    report = lint_paths([df], config=LintConfig(), hadolint=False)
    return [(f.rule_id, f.line or 0, f.severity.value, f.message) for f in report.findings]


def test_root_user_of_a_base_left_open_by_a_build_arg(tmp_path: Path) -> None:
    tail = 'HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/ || exit 1\nCMD ["python", "x.py"]\n'
    open_ = _lint(tmp_path, "ARG BASE\nFROM ${BASE}\n" + tail)
    assert [(r, s) for r, _n, s, _m in open_] == [("arg-unresolved", "error"),
                                                   ("root-user", "warning")]
    assert "ARG BASE" in open_[1][3]
    defaulted = _lint(tmp_path, f"ARG BASE={PINNED}\nFROM ${{BASE}}\n" + tail)
    assert [(r, s) for r, _n, s, _m in defaulted] == [("root-user", "warning")]
    assert "--build-arg" in defaulted[0][3]
    with_user = _lint(tmp_path, "ARG BASE\nFROM ${BASE}\nUSER 10001\n" + tail)
    assert [r for r, *_ in with_user] == ["arg-unresolved"]


@pytest.mark.parametrize("head", ["ARG BASE=\nFROM ${BASE}\n", "ARG BASE\nFROM ${BASE:-}\n",
                                  'ARG BASE=""\nFROM $BASE\n'])
def test_a_from_that_resolves_to_nothing_is_said_once(tmp_path: Path, head: str) -> None:
    found = _lint(tmp_path, head + "USER 10001\nCMD [\"python\", \"x.py\"]\n")
    assert [r for r, *_ in found] == ["arg-unresolved"], found
    assert "empty image name" in found[0][3]


def test_a_torchserve_model_store_shows_a_server_behind_an_unread_start(tmp_path: Path) -> None:
    head = f"FROM {PINNED}\nRUN pip install --no-cache-dir nvgpu==0.10.0\n"
    tail = 'USER 10001\nCMD ["sh", "/srv/service/start.sh"]\n'
    store = _lint(tmp_path, head + "ADD handler.py start.sh model-store /srv/service/\n" + tail)
    assert "no-health" in [r for r, *_ in store]
    assert any("model store" in m for r, _n, _s, m in store if r == "no-health")
    plain = _lint(tmp_path, head + "ADD handler.py start.sh /srv/service/\n" + tail)
    assert "no-health" not in [r for r, *_ in plain]
    # a folder of that name as the destination only is no evidence of a store copied in
    dest = _lint(tmp_path, head + "ADD start.sh /srv/model-store\n" + tail)
    assert "no-health" not in [r for r, *_ in dest]


def test_a_download_into_a_stage_cache_is_reported_once(tmp_path: Path) -> None:
    """ENV HF_HOME in a downloader stage, a hub download there, the cache copied into the
    final stage: one finding, at the download, naming the COPY --from."""
    text = (f"FROM {PINNED} AS dl\nENV HF_HOME=/cache/hf\n"
            "RUN pip install huggingface_hub==0.23.0 && hf download acme/tiny\n"
            f"FROM {PINNED}\nCOPY --from=dl /cache/hf /cache/hf\n"
            "ENV HF_HOME=/cache/hf HF_HUB_OFFLINE=1\nUSER 10001\n"
            'HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/ || exit 1\n'
            'CMD ["python", "-m", "server"]\n')
    found = [(n, s, m) for r, n, s, m in _lint(tmp_path, text) if r == "weights-baked"]
    assert [(n, s) for n, s, _m in found] == [(3, "error")]
    assert "COPY --from=dl at line 5" in found[0][2]
    # a stage whose cache is not copied into the final image is no finding
    alone = text.replace("COPY --from=dl /cache/hf /cache/hf\n", "")
    assert not [r for r, *_ in _lint(tmp_path, alone) if r == "weights-baked"]
