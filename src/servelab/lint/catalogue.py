"""The one catalogue of network fetchers: every way a serving image fetches code, models or
data that lint recognises, wherever the code goes (a RUN, a start command, a script, a
Makefile recipe, an application module, a loop, ``eval``/``sh -c`` strings, wrappers).

Each :class:`Fetcher` names its forms (command words, or Python calls by their last name),
what it fetches, how to tell it is verified or stays offline, and the fixture folders that
show it found (``tests/data/lint/positive``) and rightly left alone (``.../negative``).
The rules consult the sets built from it here: :mod:`servelab.lint.downloads` (start
commands and scripts, weights downloaded at build time), :mod:`servelab.lint.pyscan`
(Python modules an application imports) and :mod:`servelab.lint.fetch` (downloads run or
installed unchecked). ``docs/rules.md`` lists it (``scripts/gen_rules_docs.py``).

A plain data module: no imports beyond typing, read at lint's start.
"""

from __future__ import annotations

from typing import NamedTuple

#: the kind of a Python load that runs only when a file check fails: a first-start download
FIRST_START = "first-start"

CODE = "code"
MODEL = "model"
DATA = "data"


class Fetcher(NamedTuple):
    """One network fetcher and the forms lint knows it by."""

    name: str
    #: shell forms: command words after the program (``("gsutil", "cp")``; options between
    #: them are skipped, ``gsutil -m cp``); ``("curl",)`` for the program alone
    commands: tuple[tuple[str, ...], ...]
    #: Python forms, by the call's last name (``snapshot_download``, ``download_file``)
    calls: tuple[str, ...]
    #: CODE, MODEL or DATA (a tuple: a cloud copy fetches whatever the bucket holds)
    fetches: tuple[str, ...]
    #: how to tell a use is verified (checked against a digest) or stays offline
    verified: str
    #: fixture folders (or ``*.Dockerfile`` files) under tests/data/lint/positive|negative
    positive: tuple[str, ...]
    negative: tuple[str, ...]

    @property
    def forms(self) -> list[str]:
        """Every form as written in the docs."""
        return [" ".join(c) for c in self.commands] + [f"{c}(...)" for c in self.calls]


_F = Fetcher

#: command words that copy from cloud storage: the source is a bucket URL (``gs://``,
#: ``s3://``, ``az://``, an ``https://*.blob.core.windows.net`` URL, an rclone ``remote:``)
#: or a variable the platform sets (``$STORAGE_URI``, ``$AIP_STORAGE_URI``)
CLOUD_COPIES: tuple[tuple[str, ...], ...] = (
    ("gsutil", "cp"), ("gsutil", "rsync"), ("gcloud", "storage", "cp"),
    ("gcloud", "storage", "rsync"), ("aws", "s3", "cp"), ("aws", "s3", "sync"),
    ("azcopy", "copy"), ("azcopy", "cp"), ("azcopy", "sync"), ("rclone", "copy"),
    ("rclone", "sync"), ("rclone", "copyto"), ("s5cmd", "cp"), ("s5cmd", "sync"),
)

FETCHERS: tuple[Fetcher, ...] = (
    _F("Hugging Face Hub client",
       (("huggingface-cli", "download"), ("hf", "download")),
       ("snapshot_download", "hf_hub_download"), (MODEL,),
       "offline: HF_HUB_OFFLINE=1 (ENV, the command's own VAR=1, or os.environ in the code), "
       "local_files_only=True, or a local path as the repo; verified: --revision at a "
       "40-hex commit",
       ("weights-baked-hf-cli.Dockerfile", "startup-script", "fetch-cloud-and-wrappers",
        "fetch-guarded-start"),
       ("startup-offline.Dockerfile", "startup-follow-local-files-only", "fetch-wrappers-offline",
        "fetch-first-start-ran-at-build")),
    _F("model loads by hub id",
       (), ("from_pretrained", "pipeline", "SentenceTransformer", "CrossEncoder"), (MODEL,),
       "a local path or local_files_only=True; HF_HUB_OFFLINE=1; a config, tokenizer or "
       "processor class loads no weights. Ids come from literals, constants, os.environ/"
       "os.getenv (the image's ENV first) and loops over literal lists; an id read from an "
       "environment variable the image does not set counts unless its name says path or dir",
       ("weights-baked-sentence-transformer.Dockerfile", "startup-pipeline-script",
        "fetch-python-apis"),
       ("startup-pipeline-local", "startup-follow-model-mount", "fetch-python-local")),
    _F("model servers given a hub id",
       (("vllm", "serve"), ("text-generation-launcher",), ("lmdeploy", "serve"),
        ("llama-server",), ("mlc_llm", "serve")),
       (), (MODEL,),
       "offline: HF_HUB_OFFLINE=1; a local path (/models/x) as --model",
       ("startup-vllm-hub-id.Dockerfile", "startup-llamacpp-hf.Dockerfile",
        "startup-model-in-cmd.Dockerfile"),
       ("startup-local-path.Dockerfile", "startup-llamacpp-local-file.Dockerfile",
        "startup-positional-local.Dockerfile")),
    _F("KoboldCpp",
       (("koboldcpp",), ("koboldcpp.py",)), (), (MODEL,),
       "a local file as --model (and --sdmodel, --whispermodel, --mmproj, --draftmodel, "
       "--ttsmodel, --config); a URL or a hub id there (or in --hf) is downloaded at start, "
       "HF_HUB_OFFLINE or not. Its release binaries (koboldcpp-linux-x64-cuda1210) and "
       "python koboldcpp.py count; readiness: GET /api/v1/model",
       ("startup-koboldcpp-url.Dockerfile", "startup-koboldcpp-py-hf.Dockerfile"),
       ("startup-koboldcpp-local.Dockerfile",)),
    _F("Coqui TTS released models",
       (("tts-server",), ("tts",), ("TTS.server.server",), ("TTS.bin.synthesize",)), (),
       (MODEL,),
       "--model_path/--config_path of local files; a released name (--model_name "
       "tts_models/..., --vocoder_name vocoder_models/...) is downloaded from Coqui's own "
       "release hosts at start, so HF_HUB_OFFLINE does not stop it",
       ("startup-download-coqui-model-name.Dockerfile",
        "startup-download-coqui-tts-server-env.Dockerfile"),
       ("startup-download-coqui-model-path.Dockerfile",)),
    _F("model tools that fetch the id they are given",
       (("optimum-cli",), ("ct2-transformers-converter",), ("litgpt", "download"),
        ("ollama", "pull"), ("ollama", "run"), ("rembg", "d"), ("download-to-cache",),
        ("text-generation-server", "download-weights"), ("docling-tools", "models", "download"),
        ("mineru-models-download",)),
       (), (MODEL,),
       "a local path as the model; ollama run of a model already in the image's store",
       ("weights-baked-converter.Dockerfile", "weights-baked-rembg.Dockerfile",
        "startup-download-ollama-run", "weights-baked-project-downloaders.Dockerfile"),
       ("weights-baked-converter-local.Dockerfile", "startup-download-ollama-serve",
        "fetch-python-local")),
    _F("git",
       (("git", "clone"), ("git", "lfs", "pull")), ("Repository",), (CODE, MODEL),
       "verified: a 40-hex commit checked out (a branch or tag is mutable)",
       ("download-unverified-branch-clone.Dockerfile", "weights-baked-script",
        "fetch-cloud-and-wrappers"),
       ("download-unverified-pinned-clone.Dockerfile", "weights-baked-code.Dockerfile",
        "fetch-wrappers-offline")),
    _F("HTTP downloads",
       (("curl",), ("wget",), ("aria2c",)),
       ("urlretrieve", "urlopen", "download_url", "wget.download"), (CODE, MODEL, DATA),
       "verified: a checksum tool with a digest written in the Dockerfile, gpg --verify with "
       "a pinned key, cosign/minisign; a loopback URL is local",
       ("download-unverified-curl-pipe.Dockerfile", "weights-baked-model-archive.Dockerfile",
        "fetch-python-apis", "fetch-guarded-start"),
       ("download-unverified-checksum.Dockerfile", "weights-baked-hf-cdn-media.Dockerfile",
        "fetch-wrappers-offline")),
    _F("streamed HTTP clients written to a file",
       (), ("requests.get", "httpx.get", "httpx.stream"), (MODEL, DATA),
       "a loopback URL; a URL that names no weights or model archive",
       ("weights-baked-python-fetch", "fetch-python-apis"),
       ("weights-baked-script-local", "fetch-python-local")),
    _F("cloud storage copies",
       CLOUD_COPIES,
       ("download_file", "download_fileobj", "download_to_filename", "download_blob"),
       (CODE, MODEL, DATA),
       "an upload (local source, bucket destination) fetches nothing; a copy into the image "
       "at build time counts as baked weights only when the path names weights; an installer "
       "or program copied from a bucket and run is checked as any download (a digest written "
       "in the Dockerfile)",
       ("fetch-cloud-and-wrappers", "fetch-cloud-build.Dockerfile", "fetch-python-apis",
        "fetch-cloud-installer.Dockerfile", "fetch-make-and-loop"),
       ("fetch-cloud-upload", "fetch-cloud-build-code.Dockerfile", "fetch-python-local",
        "fetch-cloud-installer-checked.Dockerfile")),
    _F("torch hub",
       (), ("torch.hub.load", "download_url_to_file", "load_state_dict_from_url", "load_url"),
       (CODE, MODEL),
       "source='local' for torch.hub.load; a loopback URL; TORCH_HOME on a mounted volume "
       "still downloads once per node",
       ("fetch-python-apis",), ("fetch-python-local",)),
    _F("whisper and faster-whisper",
       (), ("WhisperModel", "download_model", "load_model"), (MODEL,),
       "a local path as the model (faster-whisper's local_files_only=True)",
       ("fetch-python-apis",), ("fetch-python-local",)),
    _F("translation models loaded by name",
       (), ("EasyNMT",), (MODEL,),
       "a local path as the model (EasyNMT('/models/opus-mt')); EasyNMT fetches a model "
       "name ('opus-mt', 'm2m_100_418M') from the hub into its cache",
       ("fetch-python-apis", "startup-follow-easynmt"),
       ("fetch-python-local", "startup-follow-easynmt-local")),
    _F("pretrained vision models",
       (), ("create_model", "torchvision.models", "open_clip.create_model_and_transforms"),
       (MODEL,),
       "pretrained=False or weights=None (open_clip: no pretrained tag, or a local file as "
       "pretrained)",
       ("fetch-python-apis", "fetch-cloud-installer.Dockerfile"),
       ("fetch-python-local", "fetch-cloud-installer-checked.Dockerfile")),
    _F("other model hubs and single-file loads",
       (), ("ollama.pull", "keras.utils.get_file", "from_single_file", "KerasLayer"),
       (MODEL,),
       "a local path (from_single_file('/models/x.safetensors'), KerasLayer('/models/x'))",
       ("fetch-python-apis",), ("fetch-python-local",)),
    _F("NLP data and model packages",
       (("spacy", "download"), ("nltk.downloader",), ("gdown",)),
       ("nltk.download", "spacy.cli.download", "gdown.download", "gdown.download_folder"),
       (MODEL, DATA),
       "spaCy models installed as pinned wheels; NLTK_DATA on a mounted volume",
       ("fetch-python-apis", "fetch-cloud-and-wrappers", "fetch-make-and-loop"),
       ("fetch-python-local", "fetch-wrappers-offline")),
    _F("package installers",
       (("pip", "install"), ("pipx", "install"), ("conda", "install"), ("mamba", "install"),
        ("apt-get", "install"), ("apt", "install"), ("apk", "add"), ("npm", "install"),
        ("npm", "ci"), ("yarn", "add"), ("uv", "sync"), ("poetry", "install")),
       (), (CODE,),
       "verified: pip --require-hashes/--hash, pinned versions (unpinned-packages); at start "
       "any install counts",
       ("startup-pip-shell-form.Dockerfile", "startup-follow-launcher-installs",
        "fetch-cloud-and-wrappers"),
       ("startup-follow-launcher-no-install", "unpinned-pip-pinned.Dockerfile",
        "fetch-wrappers-offline")),
)


#: KoboldCpp: its program names (the release binaries ``koboldcpp``,
#: ``koboldcpp-linux-x64-cuda1210``, ``koboldcpp.py`` run by Python) and the options whose
#: value it downloads when it is a URL or a hub id
KOBOLDCPP_PROGRAM = r"^koboldcpp([-_][\w.-]+)?(\.py)?$"
KOBOLDCPP_OPTIONS = ("--model", "--hf", "--sdmodel", "--whispermodel", "--mmproj",
                     "--draftmodel", "--ttsmodel", "--embeddingsmodel", "--config")
#: Coqui TTS: its programs, ``python -m`` modules, the options naming a released model, and
#: the shape of those names
COQUI_PROGRAMS = tuple(c[0] for f in FETCHERS if f.name == "Coqui TTS released models"
                       for c in f.commands if "." not in c[0])
COQUI_MODULES = tuple(c[0] for f in FETCHERS if f.name == "Coqui TTS released models"
                      for c in f.commands if "." in c[0])
COQUI_OPTIONS = ("--model_name", "--vocoder_name")
COQUI_MODEL = r"^(tts_models|vocoder_models|voice_conversion_models)/[\w./-]+$"


def _index() -> dict[str, Fetcher]:
    out: dict[str, Fetcher] = {}
    for f in FETCHERS:
        for c in f.commands:
            out.setdefault(c[0], f)
    return out


#: the program that starts each shell form -> its fetcher
BY_PROGRAM = _index()
#: the last names of the Python calls that fetch
PYTHON_CALLS = frozenset(c.rsplit(".", 1)[-1] for f in FETCHERS for c in f.calls)


def command_form(argv: list[str]) -> tuple[Fetcher, tuple[str, ...]] | None:
    """The fetcher and form the command *argv* (its program's base name first) is, or None.
    Options between the words of a form are skipped: ``gsutil -m cp``, ``aws --region x s3
    cp`` (an option's value may come between too: ``s5cmd --numworkers 8 cp``)."""
    if not argv:
        return None
    prog = argv[0].rsplit("/", 1)[-1]
    if prog not in BY_PROGRAM:
        return None
    words = [w for w in argv[1:6] if not w.startswith("-")]
    for f in FETCHERS:
        for form in f.commands:
            if form[0] != prog:
                continue
            rest = form[1:]
            if not rest:
                return f, form
            for i in range(min(3, len(words))):
                if tuple(words[i:i + len(rest)]) == rest:
                    return f, form
    return None


def is_cloud_copy(form: tuple[str, ...]) -> bool:
    return form in CLOUD_COPIES


#: what a cloud copy's source looks like when it is remote
_REMOTE_SCHEMES = ("gs://", "s3://", "az://", "abfs://", "abfss://", "wasb://", "wasbs://",
                   "r2://", "oss://", "https://", "http://")


def remote_source(value: str) -> bool:
    """Whether a copy's source is remote: a bucket URL, an rclone ``remote:path``, or a
    variable the platform sets (``$STORAGE_URI``: a local path is seldom held in one)."""
    if value.startswith(_REMOTE_SCHEMES):
        return True
    if value.startswith("$"):
        return not _local_variable(value)
    head, colon, _rest = value.partition(":")
    return bool(colon) and "/" not in head and head.replace("-", "").replace("_", "").isalnum()


def _local_variable(value: str) -> bool:
    """Whether a value held in a variable names a local path by the variable's name
    (``${LOCAL_PATH}``, ``$MODEL_DIR``; not ``$STORAGE_URI``, ``$S3_MODEL_PATH``)."""
    name = value.lstrip("${").split("}", 1)[0].split("/", 1)[0].upper()
    remote = any(w in name for w in ("URI", "URL", "BUCKET", "S3", "GCS", "GS_", "REMOTE",
                                     "BLOB", "SOURCE", "SRC"))
    local = any(w in name for w in ("DIR", "PATH", "LOCAL", "FOLDER", "HOME", "CACHE",
                                    "MOUNT", "DEST", "TARGET"))
    return local and not remote


def cloud_copy_source(argv: list[str], form: tuple[str, ...]) -> tuple[str, str] | None:
    """(source, destination) of a cloud copy that downloads (a remote source, a local
    destination), or None (an upload, or too few operands). The source is the first
    remote operand after the form's words, the destination the last operand."""
    operands = [w for w in argv[1:] if not w.startswith("-")]
    for w in form[1:]:
        if w in operands:
            operands = operands[operands.index(w) + 1:]
    if len(operands) < 2:
        return None
    dest = operands[-1]
    src = next((o for o in operands[:-1] if remote_source(o)), None)
    if src is None or (remote_source(dest) and not dest.startswith(("/", ".", "~"))):
        return None
    return src, dest


#: Python calls that fetch whatever they are given (their dotted name ends so); a local
#: source (``local_files_only=True``, ``source="local"``, a loopback URL) stays local
PY_FETCH_CALLS = ("snapshot_download", "hf_hub_download", "torch.hub.load",
                  "download_url_to_file", "load_state_dict_from_url", "model_zoo.load_url",
                  "nltk.download", "spacy.cli.download", "gdown.download",
                  "gdown.download_folder", "urlretrieve", "download_file", "download_fileobj",
                  "download_to_filename", "faster_whisper.download_model", "ollama.pull",
                  "keras.utils.get_file", "from_single_file", "KerasLayer")
#: Python calls that fetch the model named by their first argument unless it is a local
#: path: whisper sizes ("base") and faster-whisper sizes ("large-v3") are fetched too, and
#: EasyNMT's model names ("opus-mt")
PY_NAMED_MODEL_CALLS = ("WhisperModel", "whisper.load_model", "EasyNMT")
#: Python calls that fetch pretrained weights when ``pretrained=True`` or ``weights=`` is
#: given (timm, torchvision)
PY_PRETRAINED_CALLS = ("timm.create_model", "create_model", "torchvision.models",
                       "open_clip.create_model_and_transforms")
#: libraries whose bare fetch calls (``from faster_whisper import download_model``) fetch
PY_LIBRARIES = frozenset({"huggingface_hub", "torch", "faster_whisper", "whisper", "nltk",
                          "spacy", "gdown", "boto3", "google", "urllib", "timm",
                          "torchvision", "wget", "ollama", "open_clip", "keras", "tensorflow",
                          "tensorflow_hub", "diffusers"})
