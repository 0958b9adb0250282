"""The catalogue of network fetchers (servelab.lint.catalogue): every entry has fixtures
both ways, its shell forms are recognised behind wrappers, and the shell reader takes apart
the forms bash runs (ANSI-C quoting, here-strings, eval and sh -c of variables, wrappers,
file-test guards); a form it cannot read is a coverage note."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest

from servelab.lint import catalogue, downloads, pyscan, shell

DATA = Path(__file__).resolve().parents[1] / "data" / "lint"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("entry", catalogue.FETCHERS, ids=lambda f: f.name)
def test_every_entry_has_fixtures_both_ways(entry: catalogue.Fetcher) -> None:
    assert entry.positive and entry.negative
    for kind, names in (("positive", entry.positive), ("negative", entry.negative)):
        for name in names:
            assert (DATA / kind / name).exists(), f"{entry.name}: {kind}/{name} is missing"
    assert entry.forms and entry.verified and set(entry.fetches) <= {
        catalogue.CODE, catalogue.MODEL, catalogue.DATA}


@pytest.mark.parametrize("line", [
    "gsutil -m cp -r $STORAGE_URI /mnt/models",
    "gsutil rsync -r gs://b/m /models",
    "gcloud storage cp -r gs://b/m /models",
    "gcloud storage rsync gs://b/m /models",
    "aws s3 cp s3://b/m /models --recursive",
    "aws --region us-east-1 s3 sync s3://b/m /models",
    "azcopy copy https://a.blob.core.windows.net/c/m /models --recursive",
    "rclone copy remote:b/m /models",
    "rclone sync remote:b/m /models",
    "s5cmd --numworkers 8 cp 's3://b/m/*' /models/",
    "timeout 600 sudo -u app nice -n 5 gsutil -m cp -r ${AIP_STORAGE_URI} /models",
    "aws s3 sync ${MODEL_URL} ${LOCAL_MODEL_PATH}",
    'aws s3 cp --recursive "$S3_MODEL_PATH" "$MODEL_DIR"',
])
def test_cloud_copies_at_start(line: str) -> None:
    problems = downloads.start_problems(line, {})
    assert [p.what for p in problems if "cloud storage" in p.what], line


@pytest.mark.parametrize("line", [
    "aws s3 cp /var/log/x.log s3://b/logs/",
    "gsutil -m cp /tmp/m.json gs://b/",
    "rclone copy /app/reports remote:daily",
    "aws s3 ls s3://b/",
    "gsutil cat gs://b/x",
    "aws s3 sync ${WEB_DIR}/ s3://${SITE_BUCKET}/ --delete",
    "aws s3 sync ${RESULTS} s3://${OUT_BUCKET}/results",
])
def test_uploads_and_listings_are_no_fetch(line: str) -> None:
    assert downloads.start_problems(line, {}) == []


def _argvs(text: str) -> list[list[str]]:
    return [c.argv for c in shell.commands(text)]


@pytest.mark.parametrize(("text", "argv"), [
    ("pip $'install' torch", ["pip", "install", "torch"]),
    ("pip $'\\x69nstall' torch", ["pip", "install", "torch"]),
    ("bash <<< 'pip install torch'", ["pip", "install", "torch"]),
    ('CMD="pip install x"; eval "$CMD"', ["pip", "install", "x"]),
    ('S="huggingface-cli download o/m"; sh -c "$S"', ["huggingface-cli", "download", "o/m"]),
    ("timeout -s KILL 30 pip install x", ["pip", "install", "x"]),
    ("env -i -u B A=1 pip install x", ["pip", "install", "x"]),
    ('env -S "pip install x"', ["pip", "install", "x"]),
    ("nice -n 10 ionice -c 3 pip install x", ["pip", "install", "x"]),
    ("stdbuf -oL taskset -c 0-3 numactl --membind=0 -N 0 pip install x",
     ["pip", "install", "x"]),
    ("xargs -n1 -P4 pip install", ["pip", "install"]),
    ("sudo -u app -E nohup pip install x", ["pip", "install", "x"]),
    ("su -c 'pip install x' app", ["pip", "install", "x"]),
    ('su app -c "pip install x"', ["pip", "install", "x"]),
    ("chroot /srv pip install x", ["pip", "install", "x"]),
    ("bash -o pipefail -c 'pip install x'", ["pip", "install", "x"]),
    ('DL="hf download"; $DL o/m', ["hf", "download", "o/m"]),
])
def test_shell_reader_takes_apart_what_bash_runs(text: str, argv: list[str]) -> None:
    assert argv in _argvs(text)


@pytest.mark.parametrize("text", ['eval "$UNSET"', 'bash -c "$SETUP"', "sh -c \"$X\""])
def test_an_unknown_variable_run_is_a_coverage_note(text: str) -> None:
    notes = shell.unread(text)
    assert len(notes) == 1 and notes[0][0] == 1
    problems = downloads.start_problems(text, {})
    assert [p.unread for p in problems] == [True]


def test_a_variable_the_image_sets_is_read() -> None:
    assert shell.unread('eval "$SETUP"', {"SETUP": "pip install x"}) == []
    assert ["pip", "install", "x"] in [c.argv for c in shell.commands(
        'eval "$SETUP"', env={"SETUP": "pip install x"})]


@pytest.mark.parametrize(("text", "guarded"), [
    ("if [ ! -f /m/x ]; then curl -o /m/x https://h/x; fi", "/m/x"),
    ("if ! [ -e /m/x ]; then wget https://h/x; fi", "/m/x"),
    ("if [ -d /m ]; then echo ok; else huggingface-cli download o/m; fi", "/m"),
    ("[ -f /m/x ] || curl -o /m/x https://h/x", "/m/x"),
    ("test -d /m || { huggingface-cli download o/m; }", "/m"),
    ("[ ! -s /m/x ] && wget https://h/x", "/m/x"),
    ('if [ -z "$(ls -A /models)" ]; then gsutil -m cp -r gs://b/m /models; fi', "/models"),
    ('[ -n "$(ls -A /models 2>/dev/null)" ] || aws s3 sync s3://b/m /models', "/models"),
    ("if [[ ! -f /m/x ]]; then curl -o /m/x https://h/x; fi", "/m/x"),
    ("curl -o /m/x https://h/x", ""),
    ('if [ "$A" = 1 ]; then curl https://h/x; fi', ""),
    ("if [ ! -f /m/x ]; then echo; fi; curl https://h/x", ""),
])
def test_file_test_guards(text: str, guarded: str) -> None:
    fetches = [c for c in shell.commands(text)
               if c.name in {"curl", "wget", "huggingface-cli", "gsutil", "aws"}]
    assert [c.guard for c in fetches] == [guarded]
    problems = downloads.start_problems(text, {})
    assert [p.guard for p in problems] == [guarded]
    assert ("at first start" in problems[0].what) == bool(guarded)


def test_every_python_form_in_the_fixture_is_found() -> None:
    text = (DATA / "positive" / "fetch-python-apis" / "main.py").read_text()
    module = pyscan.scan(text, lambda _n: None)
    assert module is not None
    marked = {n for n, line in enumerate(text.splitlines(), start=1) if "# fetch" in line}
    assert marked <= {load.line for load in module.top.loads}
    local = (DATA / "negative" / "fetch-python-local" / "main.py").read_text()
    kept = pyscan.scan(local, lambda _n: None)
    assert kept is not None and kept.top.loads == []


def test_a_fetch_behind_a_file_check_is_first_start() -> None:
    module = pyscan.scan(
        "import os\nfrom huggingface_hub import snapshot_download\n"
        "def get(p):\n    if os.path.exists(p):\n        return\n"
        "    snapshot_download('o/m')\n"
        "if not os.path.isdir('/m'):\n    snapshot_download('o/n')\n"
        "snapshot_download('o/k')\n", lambda _n: None)
    assert module is not None
    assert [x.kind for x in module.functions["get"].loads] == [catalogue.FIRST_START]
    assert [x.kind for x in module.top.loads] == [catalogue.FIRST_START, "hub"]


def test_the_rules_docs_list_every_entry() -> None:
    spec = importlib.util.spec_from_file_location("gen", REPO / "scripts" / "gen_rules_docs.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = gen.render()
    for entry in catalogue.FETCHERS:
        assert f"| {entry.name} |" in text
    assert "`gsutil cp`" in text and "`WhisperModel(...)`" in text


def test_nesting_past_the_bound_is_a_coverage_note() -> None:
    text = "pip install x"
    for _ in range(shell.MAX_DEPTH + 1):
        text = f"sh -c {shlex.quote(text)}"
    notes = shell.unread(text)
    assert notes and "deep" in notes[0][1]
    shallow = "sh -c 'sh -c \"pip install x\"'"
    assert shell.unread(shallow) == [] and ["pip", "install", "x"] in _argvs(shallow)


def test_eval_of_an_env_value_in_the_start_command(tmp_path: Path) -> None:
    from servelab.lint import LintConfig, lint_paths

    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
        "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1\n"
        'ENV SETUP="pip install --no-cache-dir vllm==0.6.0"\n'
        "USER 10001\nEXPOSE 8000\n"
        "HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n"
        'CMD ["sh", "-c", "eval \\"$SETUP\\" && exec vllm serve /models/x"]\n')
    report = lint_paths([df], config=LintConfig(), hadolint=False)
    found = [(f.rule_id, f.line, f.severity.value) for f in report.findings]
    assert found == [("startup-download", 6, "error")]
    assert "installs packages at start" in report.findings[0].message


def test_an_unknown_argument_leaves_the_command_readable() -> None:
    assert shell.unread('eval "export A=$UNSET"') == []
    assert ["pip", "install", "$PKG"] in _argvs('sh -c "pip install $PKG"')
    assert shell.unread('sh -c "$TOOL --flag"') != []


def test_ansi_c_escapes_never_make_lone_surrogates() -> None:
    argv = _argvs("echo $'\\ud800\\U0001F600\\x41'")[0]
    assert argv[1] == "\ufffd\U0001f600A"
    argv[1].encode("utf-8")


def test_a_script_defining_a_fetcher_named_function_is_not_a_fetch() -> None:
    text = "def download_file(url, dest):\n    pass\n"
    assert downloads.start_problems(text, {}) == []
    assert [p.line for p in downloads.start_problems(text + "download_file(u, d)\n", {})] == [3]


def test_a_start_command_it_cannot_read_is_a_note_on_the_report_not_a_finding(
        tmp_path: Path) -> None:
    """`bash -c "$EXTRA_SETUP"` (a variable nobody sets) is neither a pass nor a finding of
    its own: the report carries the coverage note, with the script's line, and says
    "partly checked" for the file when it has nothing else."""
    import shutil

    from servelab.findings import VERDICT_PARTLY
    from servelab.lint import LintConfig, lint_paths

    case = DATA / "positive" / "fetch-cloud-and-wrappers"
    shutil.copytree(case, tmp_path / "c")
    report = lint_paths([tmp_path / "c" / "Dockerfile"], config=LintConfig(), hadolint=False)
    notes = [n for n in report.coverage if "EXTRA_SETUP" in n.what]
    assert len(notes) == 1, report.coverage
    assert notes[0].file.endswith("Dockerfile") and notes[0].line > 0
    assert "start.sh:" in notes[0].what
    assert all(f.severity.value != "info" for f in report.findings
               if f.rule_id == "startup-download")
    # the same script without the fetches: nothing found, yet never a plain pass
    start = tmp_path / "c" / "start.sh"
    start.write_text('#!/bin/bash\nbash -c "$EXTRA_SETUP"\nexec vllm serve /mnt/models\n')
    quiet = lint_paths([tmp_path / "c" / "Dockerfile"], config=LintConfig(), hadolint=False)
    assert not [f for f in quiet.findings if f.rule_id == "startup-download"]
    assert quiet.verdict() in (VERDICT_PARTLY, "findings")
    assert any("EXTRA_SETUP" in n.what for n in quiet.coverage)


def test_an_env_model_the_build_fetches_is_not_a_start_download(tmp_path: Path) -> None:
    """ENV names a hub id and a RUN fetches that id into the image at build: the server
    finds it in the cache (weights-baked says the weights are in the image), so the ENV is
    no start download; the same Dockerfile without the RUN is one (a warning)."""
    from servelab.lint import LintConfig, lint_paths

    base = ("FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
            "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1\n"
            "ENV WHISPER_MODEL=acme-speech/whisper-small-int8 HF_HOME=/srv/hf\n")
    fetch = ('RUN python3 -c "from huggingface_hub import snapshot_download; '
             "snapshot_download('acme-speech/whisper-small-int8')\"\n")
    tail = 'USER 10001\nEXPOSE 8000\nCMD ["uvicorn", "main:app", "--port", "8000"]\n'

    def rules(text: str) -> list[tuple[str, str]]:
        df = tmp_path / "Dockerfile"
        df.write_text(text)
        report = lint_paths([df], config=LintConfig(), hadolint=False)
        return [(f.rule_id, f.severity.value) for f in report.findings
                if f.rule_id in ("startup-download", "weights-baked")]

    assert ("startup-download", "warning") in rules(base + tail)
    built = rules(base + fetch + tail)
    assert not [r for r in built if r[0] == "startup-download"]
    assert [r for r in built if r[0] == "weights-baked"]


def test_an_import_alias_of_a_hub_library_is_resolved() -> None:
    module = pyscan.scan(
        "from transformers import AutoTokenizer as T, pipeline as pl\n"
        "import transformers as tf\n"
        "from app.loaders import load_model as from_pretrained\n"
        "T.from_pretrained('o/m')\n"
        "tf.AutoModel.from_pretrained('o/m')\n"
        "pl('text-generation', model='o/m')\n"
        "from_pretrained('o/m')\n", lambda _n: None)
    assert module is not None
    assert [x.what for x in module.top.loads] == [
        "AutoTokenizer.from_pretrained('o/m')", "transformers.AutoModel.from_pretrained('o/m')",
        "pipeline('o/m')"]


@pytest.mark.parametrize(("code", "weights"), [
    ("from transformers import AutoTokenizer as T; T.from_pretrained('o/m')", False),
    ("from transformers import AutoConfig as C, AutoProcessor as P\nP.from_pretrained('o/m')",
     False),
    ("from transformers import (\n    AutoTokenizer as Tok,\n)\nTok.from_pretrained('o/m')",
     False),
    ("import transformers as tf; tf.AutoTokenizer.from_pretrained('o/m')", False),
    ("from transformers import AutoModel as M; M.from_pretrained('o/m')", True),
    ("from transformers import AutoModel as MyTokenizer; MyTokenizer.from_pretrained('o/m')",
     True),
    ("from transformers import AutoTokenizer, AutoModel as M\nM.from_pretrained('o/m')", True),
])
def test_a_build_load_under_an_alias_is_judged_by_what_it_names(code: str, weights: bool) -> None:
    assert bool(downloads.build_weight_downloads(f"python -c {shlex.quote(code)}")) == weights
