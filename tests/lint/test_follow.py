"""Following the code a Dockerfile runs (servelab.lint.follow, servelab.lint.pyscan): the
messages say where the download is and when it runs, the walk stays in the build context and
within its bound, comments are never evidence. The fixture folders (startup-follow-*,
*-make-*, *-install-loop*, *-find-exec) hold the positive and negative cases."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.lint import LintConfig, lint_paths
from servelab.lint.follow import MAX_MODULES, entries, make_recipe
from servelab.lint.image import StageState

from .conftest import DATA, PINNED, REPO

HEAD = f"FROM {PINNED}\n"
TAIL = "USER 10001\nHEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n"


def _findings(dockerfile: Path, rule: str = "startup-download") -> list[tuple[int, str, str]]:
    report = lint_paths([dockerfile], config=LintConfig(), hadolint=False)
    return [(f.line or 0, f.severity.value, f.message) for f in report.findings
            if f.rule_id == rule]


def _app(write, main: str, extra: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
         cmd: str = '["uvicorn", "app.main:app"]', env: str = "") -> Path:
    files = {"app/__init__.py": "", "app/main.py": main, **(extra or {})}
    return write(f"{HEAD}{env}WORKDIR /srv\nCOPY app/ ./app/\n{TAIL}CMD {cmd}\n", files)


LIFESPAN = (
    "from contextlib import asynccontextmanager\n"
    "from fastapi import FastAPI\n"
    "from transformers import AutoModel\n"
    "\n"
    "@asynccontextmanager\n"
    "async def lifespan(app):\n"
    "    app.state.m = AutoModel.from_pretrained('BAAI/bge-small-en-v1.5'{opt})\n"
    "    yield\n"
    "\n"
    "app = FastAPI(lifespan=lifespan)\n"
)


def test_a_lifespan_load_names_file_line_and_hook(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    found = _findings(_app(write_dockerfile, LIFESPAN.format(opt="")))
    assert len(found) == 1
    line, severity, message = found[0]
    assert (line, severity) == (6, "error")
    assert "app/main.py:7" in message
    assert "lifespan hook lifespan()" in message
    assert "at start" in message


@pytest.mark.parametrize("opt", [", local_files_only=True", ", local_files_only=OFFLINE"])
def test_local_files_only_is_not_a_download(write_dockerfile, opt: str) -> None:  # type: ignore[no-untyped-def]
    assert _findings(_app(write_dockerfile, LIFESPAN.format(opt=opt))) == []


@pytest.mark.parametrize("env", ["ENV HF_HUB_OFFLINE=1\n", "ENV TRANSFORMERS_OFFLINE=true\n"])
def test_offline_env_silences_the_walk(write_dockerfile, env: str) -> None:  # type: ignore[no-untyped-def]
    assert _findings(_app(write_dockerfile, LIFESPAN.format(opt=""), env=env)) == []


def test_a_route_handler_load_is_a_first_request_warning(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    main = ("from fastapi import FastAPI\nfrom huggingface_hub import hf_hub_download\n"
            "app = FastAPI()\n\n@app.get('/m')\ndef m():\n"
            "    return hf_hub_download('org/gguf', 'q4.gguf')\n")
    [(_line, severity, message)] = _findings(_app(write_dockerfile, main))
    assert severity == "warning"
    assert "first request" in message and "route handler m()" in message
    assert "app/main.py:7" in message


def test_a_call_in_a_comment_or_string_is_not_evidence(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    main = ('"""snapshot_download("org/m") was used here."""\n'
            "# snapshot_download('org/m')\nX = 'snapshot_download(\"org/m\")'\n")
    assert _findings(_app(write_dockerfile, main)) == []
    live = main + "from huggingface_hub import snapshot_download\nsnapshot_download('org/m')\n"
    [(_l, _s, message)] = _findings(_app(write_dockerfile, live))
    assert "app/main.py:5" in message


def test_comment_only_download_in_a_build_script_is_not_reported(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    script = "# snapshot_download('org/m')\nprint('warm')  # hf_hub_download('org/m')\n"
    df = write_dockerfile(f"{HEAD}COPY warm.py /w/\nRUN python /w/warm.py\n{TAIL}"
                          'CMD ["python", "-m", "http.server"]\n', {"warm.py": script})
    assert _findings(df, "weights-baked") == []
    (df.parent / "warm.py").write_text(script + "snapshot_download('org/m')\n")
    assert [line for line, _s, _m in _findings(df, "weights-baked")] == [3]


def test_imports_are_followed_transitively_and_the_bound_is_said(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    n = MAX_MODULES + 6
    files = {f"app/m{i}.py": f"from app import m{i + 1}\n" for i in range(n)}
    files[f"app/m{n}.py"] = "VALUE = 1\n"
    main = ("from app import m0\nfrom huggingface_hub import snapshot_download\n"
            "snapshot_download('org/m')\n")
    [(_l, _s, message)] = _findings(_app(write_dockerfile, main, files))
    assert f"stopped at {MAX_MODULES} modules" in message


def test_a_download_deep_in_the_imports_is_found(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    files = {f"app/m{i}.py": f"from app import m{i + 1}\n" for i in range(10)}
    files["app/m10.py"] = ("from sentence_transformers import SentenceTransformer\n"
                           "ENC = SentenceTransformer('sentence-transformers/all-MiniLM-L6-v2')\n")
    [(_l, severity, message)] = _findings(_app(write_dockerfile, "from app import m0\n", files))
    assert severity == "error" and "app/m10.py:2" in message
    assert "stopped" not in message


def test_files_outside_the_context_are_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main.py").write_text("from huggingface_hub import snapshot_download\n"
                                     "snapshot_download('org/m')\n")
    ctx = tmp_path / "ctx"
    (ctx / "app").mkdir(parents=True)
    (ctx / "app" / "__init__.py").write_text("")
    (ctx / "app" / "main.py").symlink_to(outside / "main.py")
    df = ctx / "Dockerfile"
    df.write_text(f"{HEAD}WORKDIR /srv\nCOPY app/ ./app/\n{TAIL}"
                  'CMD ["uvicorn", "app.main:app"]\n')
    assert _findings(df) == []
    (ctx / "app" / "main.py").unlink()
    (ctx / "app" / "main.py").write_text((outside / "main.py").read_text())
    assert len(_findings(df)) == 1


def test_a_missing_application_points_to_context(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}WORKDIR /srv\nCOPY app/ ./app/\n{TAIL}"
                          'CMD ["uvicorn", "app.main:app"]\n')
    report = lint_paths([df], config=LintConfig(), hadolint=False)
    [f] = [f for f in report.findings if f.rule_id == "startup-download"]
    assert f.severity.value == "info"
    assert "/srv/app/main.py" in f.message and "COPY at line 3" in f.message
    assert f.fix is not None and "--context" in f.fix


def test_a_builder_stage_download_names_both_places() -> None:
    df = DATA / "positive" / "weights-baked-builder-stage.Dockerfile"
    [(line, _s, message)] = _findings(df, "weights-baked")
    assert line == 4
    assert "COPY --from=fetch at line 6" in message


@pytest.mark.parametrize(("src", "said"), [
    ("models/", "a folder named like model weights"),
    ("checkpoints", "a folder named like model weights"),
    ("models/encoder.bin", "a path inside a folder named like model weights (models/)"),
])
def test_only_folders_are_called_folders(write_dockerfile, src: str, said: str) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY {src} /opt/m/\n{TAIL}CMD [\"python\", \"-m\", \"s\"]\n")
    [(_l, _s, message)] = _findings(df, "weights-baked")
    assert said in message and "--context" in message
    if "path inside" in said:
        assert "copies a folder" not in message


def test_make_recipe_runs_prerequisites_first_and_keeps_lines() -> None:
    text = ("M ?= org/m\nall: serve\n\nserve: weights deps\n\tpython -m app\n"
            "weights:\n\t@huggingface-cli download $(M)\ndeps:\n\t-pip install -r r.txt\n"
            "other:\n\tcurl https://x/y.sh | sh\n")
    recipe = make_recipe(text, ["serve"]).split("\n")
    assert recipe[4] == "python -m app"
    assert recipe[6] == "huggingface-cli download org/m"
    assert recipe[8] == "pip install -r r.txt"
    assert "curl" not in "\n".join(recipe)
    assert make_recipe(text, []) == make_recipe(text, ["all"])
    assert make_recipe(text, ["nothing"]) == ""


@pytest.mark.parametrize(("command", "shown", "path", "when"), [
    ("uvicorn main:app --app-dir services/api", "uvicorn main:app",
     "/w/services/api/main.py", "start"),
    ("gunicorn --chdir /opt/svc -b :80 'wsgi:create_app()'", "gunicorn wsgi:create_app()",
     "/opt/svc/wsgi.py", "start"),
    ("python -m textgen_api --port 1", "python -m textgen_api", "/w/textgen_api.py", "start"),
    ("cd /srv && exec python3 -u app.py", "python3 app.py", "/srv/app.py", "start"),
    ("fastapi run", "fastapi run", "/w/main.py", "start"),
    ("streamlit run ui.py --server.port 80", "streamlit run ui.py", "/w/ui.py", "request"),
])
def test_entries_of_start_commands(command: str, shown: str, path: str, when: str) -> None:
    [entry] = entries(command, StageState(workdir="/w"), "/w")
    assert entry.shown == shown
    assert entry.paths[0] == path
    assert entry.when == when


def test_gunicorn_factory_option() -> None:
    [entry] = entries("uvicorn --factory pkg.app:build", StageState(), "/srv")
    assert entry.factory == "build"


def test_a_plain_lint_never_imports_ast(tmp_path: Path) -> None:
    plain = str(DATA / "positive" / "root-user-none.Dockerfile")
    code = (
        "import sys\nfrom servelab.cli import main\n"
        f"main(['lint', '--no-hadolint', '--fail-on', 'none', {plain!r}])\n"
        "print('ast' in sys.modules, 'servelab.lint.pyscan' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, check=False).stdout
    assert out.strip().splitlines()[-1] == "False False"


def test_make_targets_from_variables_and_the_automatic_target_name() -> None:
    text = ("MODELS := tiny base.en\n.PHONY: $(MODELS)\n$(MODELS):\n"
            "\tbash ./models/download.sh $@\n\tcmake -B build\n")
    recipe = make_recipe(text, ["base.en"]).split("\n")
    assert recipe[3] == "bash ./models/download.sh base.en"
    assert make_recipe(text, ["large"]) == ""


CLI_APP = (
    "import os\nimport fire\n"
    "try:\n    from transformers import AutoModel\nexcept ImportError:\n    AutoModel = None\n"
    "\n\ndef main(base_model: str = os.getenv('BASE_MODEL', {default!r}), port: int = 7860):\n"
    "    model = AutoModel.from_pretrained(base_model)\n    return model\n\n\n"
    "if __name__ == '__main__':\n    fire.Fire(main)\n"
)


@pytest.mark.parametrize(("default", "env", "found"), [
    ("h2oai/h2ogpt-4096-llama2-7b-chat", "", True),
    ("/models/h2ogpt", "", False),
    ("h2oai/h2ogpt-4096-llama2-7b-chat", "ENV BASE_MODEL=/models/h2ogpt\n", False),
])
def test_a_cli_entry_point_runs_with_its_parameter_defaults(  # type: ignore[no-untyped-def]
        write_dockerfile, default: str, env: str, found: bool) -> None:
    df = write_dockerfile(f"{HEAD}{env}WORKDIR /w\nCOPY generate.py /w/\n{TAIL}"
                          'ENTRYPOINT ["python3", "/w/generate.py"]\n',
                          {"generate.py": CLI_APP.format(default=default)})
    got = _findings(df)
    assert bool(got) is found
    if found:
        assert "generate.py:10" in got[0][2] and "under __main__" in got[0][2]


@pytest.mark.parametrize("main", [
    "from app.core import loader\nloader.load()\n",
    "import app.core.loader\napp.core.loader.load()\n",
    "import app.core.loader as ld\nld.load()\n",
    "from .core.loader import load as warm\nwarm()\n",
])
def test_calls_reach_functions_of_other_modules(write_dockerfile, main: str) -> None:  # type: ignore[no-untyped-def]
    files = {"app/core/__init__.py": "",
             "app/core/loader.py": ("from huggingface_hub import snapshot_download\n\n\n"
                                    "def load():\n    return snapshot_download('org/m')\n")}
    [(_l, _s, message)] = _findings(_app(write_dockerfile, main, files))
    assert "app/core/loader.py:5" in message and "in load()" in message


def test_a_missing_start_script_points_to_context(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = write_dockerfile(f"{HEAD}COPY docker/start.sh /start.sh\n{TAIL}"
                          'ENTRYPOINT ["/start.sh"]\n')
    report = lint_paths([df], config=LintConfig(), hadolint=False)
    [f] = [f for f in report.findings if f.rule_id == "startup-download"]
    assert (f.severity.value, f.line) == ("info", 5)
    assert "/start.sh" in f.message and "COPY at line 2" in f.message
    assert f.fix is not None and "--context" in f.fix
    (df.parent / "docker").mkdir()
    (df.parent / "docker" / "start.sh").write_text("#!/bin/sh\nexec python -m server\n")
    assert [f for f in lint_paths([df], config=LintConfig(), hadolint=False).findings
            if f.rule_id == "startup-download"] == []


@pytest.mark.parametrize("run", [
    "uvicorn.run('app.server:app', host='0.0.0.0')",
    "uvicorn.run(app='app.server:build', factory=True)",
])
def test_uvicorn_run_with_an_app_string_is_followed(write_dockerfile, run: str) -> None:  # type: ignore[no-untyped-def]
    server = ("from fastapi import FastAPI\nfrom transformers import pipeline\n"
              "def build():\n    app = FastAPI()\n"
              "    app.state.p = pipeline('fill-mask', model='FacebookAI/roberta-base')\n"
              "    return app\n"
              "app = build() if __name__ == 'app.server' else None\n")
    main = f"import uvicorn\n\nif __name__ == '__main__':\n    {run}\n"
    df = _app(write_dockerfile, main, {"app/server.py": server},
              cmd='["python", "-m", "app.main"]')
    [(_l, _s, message)] = _findings(df)
    assert "app/server.py:5" in message


@pytest.mark.parametrize("hostile", [
    "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "x = a" + ".b" * 30000 + "\n",
    "def f(:\n",
    "\x00binary",
])
def test_modules_that_do_not_parse_are_skipped(write_dockerfile, hostile: str) -> None:  # type: ignore[no-untyped-def]
    files = {"app/broken.py": hostile}
    main = ("from app import broken\nfrom huggingface_hub import snapshot_download\n"
            "snapshot_download('org/m')\n")
    [(_l, _s, message)] = _findings(_app(write_dockerfile, main, files))
    assert "app/main.py:3" in message


def test_a_module_that_is_a_pipe_is_never_opened(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    df = _app(write_dockerfile, "from app import fifo\n")
    os.mkfifo(df.parent / "app" / "fifo.py")
    (df.parent / "Makefile").unlink(missing_ok=True)
    assert _findings(df) == []


def test_a_cd_before_a_script_is_followed(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    fetch = "from huggingface_hub import snapshot_download\nsnapshot_download('org/m')\n"
    df = write_dockerfile(f"{HEAD}COPY tools/ /opt/tools/\nRUN cd /opt/tools && python fetch.py\n"
                          f"{TAIL}CMD [\"python\", \"-m\", \"http.server\"]\n",
                          {"tools/fetch.py": fetch})
    [(line, _s, message)] = _findings(df, "weights-baked")
    assert line == 3 and "tools/fetch.py:2" in message


@pytest.mark.parametrize(("head", "found"), [
    ("from transformers import pipeline\n", True),
    ("from app.nlp import pipeline\n", False),
    ("def pipeline(task):\n    return task\n", False),
])
def test_a_pipeline_of_the_application_is_not_the_library(  # type: ignore[no-untyped-def]
        write_dockerfile, head: str, found: bool) -> None:
    main = head + "clf = pipeline('sentiment-analysis')\n"
    files = {"app/nlp.py": "def pipeline(task):\n    return task\n"}
    assert bool(_findings(_app(write_dockerfile, main, files))) is found


def test_installs_in_python_are_reported_even_offline(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    main = ("import os\nfrom fastapi import FastAPI\napp = FastAPI()\n"
            "os.system('pip install --no-cache-dir flash-attn')\n\n"
            "@app.post('/x')\ndef x():\n    import pip\n    pip.main(['install', 'einops'])\n")
    found = sorted(_findings(_app(write_dockerfile, main, env="ENV HF_HUB_OFFLINE=1\n")),
                   key=lambda f: f[1])
    assert [(s, "installs packages" in m) for _l, s, m in found] == [
        ("error", True), ("warning", True)]
    assert "app/main.py:4" in found[0][2] and "app/main.py:9" in found[1][2]
