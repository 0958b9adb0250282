"""What weights-baked, no-health and unpinned-packages say: the evidence each finding names
(the fixtures under tests/data/lint check only which rules fire on which lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.lint import LintConfig, lint_paths

from .conftest import PINNED

HEAD = f"FROM {PINNED}\n"
TAIL = "USER 10001\nHEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n"
NO_HEALTH_TAIL = "USER 10001\n"
CMD = 'CMD ["python", "-m", "s"]\n'


def _findings(dockerfile: Path, rule: str) -> list[tuple[int, str, str]]:
    report = lint_paths([dockerfile], config=LintConfig(), hadolint=False)
    return [(f.line or 0, f.severity.value, f.message) for f in report.findings
            if f.rule_id == rule]


def test_a_model_store_folder_is_judged_by_its_name_and_says_so(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY model_store/ /srv/store/\n{TAIL}{CMD}")
    [(line, severity, message)] = _findings(df, "weights-baked")
    assert (line, severity) == (2, "warning")
    assert "model store (model_store/" in message and "only its name was judged" in message


def test_a_model_folder_counts_only_when_copied_to_a_model_path(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}WORKDIR /api\nCOPY ./model ./model\nCOPY model/ /api/code/\n"
                          f"{TAIL}{CMD}")
    [(line, severity, message)] = _findings(df, "weights-baked")
    assert (line, severity) == (3, "warning")
    assert "named model/, to the model path ./model" in message


def test_a_mar_archive_by_name_is_an_error(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY dist/resnet.mar /srv/store/\n{TAIL}{CMD}")
    [(_line, severity, message)] = _findings(df, "weights-baked")
    assert severity == "error" and "dist/resnet.mar" in message


def test_the_archiver_finding_names_the_weights_and_the_store(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}RUN torch-model-archiver --model-name m --version 1 "
                          "--serialized-file=/w/m.pt --handler h.py --export-path /store\n"
                          f"{TAIL}{CMD}")
    [(_line, _severity, message)] = _findings(df, "weights-baked")
    assert message.startswith("RUN packs model weights into the image at build time")
    assert "--serialized-file /w/m.pt into /store" in message


@pytest.mark.parametrize("name", ["mean.pt", "running_std.pth", "feature-stats.pt"])
def test_statistics_tensors_are_not_weights_but_big_ones_are(write_dockerfile, name: str) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY data/ /srv/data/\n{TAIL}{CMD}")
    small = df.parent / "data" / name
    small.parent.mkdir()
    small.write_bytes(b"PK\x03\x04" + b"\0" * 500)
    assert _findings(df, "weights-baked") == []
    small.write_bytes(b"PK\x03\x04" + b"\0" * (1024 * 1024))  # 1 MiB: a model, whatever its name
    [(_line, _severity, message)] = _findings(df, "weights-baked")
    assert f"data/{name}" in message


def test_a_pull_script_names_the_line_of_the_pull(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY get.sh /get.sh\nRUN sh /get.sh\n{TAIL}{CMD}",
                          {"get.sh": "#!/bin/sh\nollama serve &\nsleep 3\nollama pull \"$M\"\n"})
    [(line, _severity, message)] = _findings(df, "weights-baked")
    assert line == 3 and "ollama pull in" in message and "get.sh:4" in message


def test_no_health_names_the_server_an_unread_script_sits_beside(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}RUN pip install \"uvicorn[standard]==0.30.1\"\n"
                          f"COPY go.sh /go.sh\n{NO_HEALTH_TAIL}ENTRYPOINT [\"/go.sh\"]\n")
    [(line, _severity, message)] = _findings(df, "no-health")
    assert line == 1
    assert "its start program /go.sh was not read" in message
    assert "pip install uvicorn[standard] at line 2" in message


def test_no_health_reads_sh_c_and_stays_silent_for_an_interpreter(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    served = write_dockerfile(f"{HEAD}RUN pip install \"gradio==4.44.1\"\n{NO_HEALTH_TAIL}"
                              "ENTRYPOINT [\"sh\", \"-c\", \"exec /opt/run-ui --share\"]\n")
    [(_line, _severity, message)] = _findings(served, "no-health")
    assert "/opt/run-ui was not read" in message
    tool = write_dockerfile(f"{HEAD}RUN pip install \"gradio==4.44.1\"\n{NO_HEALTH_TAIL}"
                            "ENTRYPOINT [\"sh\", \"-c\", \"python convert.py\"]\n", name="D2")
    assert _findings(tool, "no-health") == []


def test_unpinned_conda_run_and_update_are_named(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}RUN conda run -n env pip install install runpod"
                          " && conda update --all\n"
                          f"{TAIL}{CMD}")
    messages = sorted(m for _l, _s, m in _findings(df, "unpinned-packages"))
    assert messages == ["conda update without pinned versions: --all (every package)",
                        "pip install without pinned versions: runpod"]


def test_an_env_model_the_cmd_passes_too_is_one_finding_naming_the_env(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}ENV MODEL_ID=acme/m-7b\n{TAIL}"
                          'CMD ["text-generation-launcher", "--model-id", "acme/m-7b"]\n')
    [(line, severity, message)] = _findings(df, "startup-download")
    assert (line, severity) == (5, "error")
    assert "the CMD passes the hub model id 'acme/m-7b'" in message
    assert message.endswith("(ENV MODEL_ID at line 2 names the same model)")


def test_an_env_model_a_start_script_reads_is_one_finding(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}ENV MODEL_ID=acme/m-7b\nCOPY start.sh /start.sh\n{TAIL}"
                          'CMD ["/start.sh"]\n')
    (df.parent / "start.sh").write_text(
        '#!/bin/sh\nexec text-generation-launcher --model-id "$MODEL_ID"\n')
    [(line, _severity, message)] = _findings(df, "startup-download")
    assert line == 6 and "passes the hub model id 'acme/m-7b'" in message
    assert "ENV MODEL_ID at line 2 names the same model" in message


def test_a_weight_file_a_builder_downloaded_is_reported_once_at_its_run(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"FROM {PINNED} AS fetch\n"
                          "RUN huggingface-cli download acme/m-7b --local-dir /w\n"
                          f"{HEAD}COPY --from=fetch /w/model.safetensors /m/\n{TAIL}{CMD}")
    [(line, _severity, message)] = _findings(df, "weights-baked")
    assert line == 2
    assert "stage fetch reaches the final image through COPY --from=fetch at line 4" in message
