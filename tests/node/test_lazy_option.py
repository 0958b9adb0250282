"""The lazy arm as an option of servelab run: bad input is exit 2 naming the option and the
fix; a required lazy arm that cannot run here is exit 3; one not required is recorded as
"lazy not measured: <reason>"; and through NodeStarts on the real parts it yields the
``metrics.coldstart.lazy`` of result.json (checked against its schema), its SOCI index gone
from the registry at the end of the run."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lazyimages import copy_image, tags_of
from servelab.cleanup import Cleanup
from servelab.errors import CapabilityError, InputError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, ImageLayers, NodeSettings, NodeStarts, read_layers
from servelab.node.lazypull import LazySettings
from servelab.node.soci import LazyRegistry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"
SCHEMA = ROOT / "src" / "servelab" / "schemas" / "result.schema.json"
RUN = "test-lazy-"


def _lazy_schema() -> dict[str, Any]:
    s = json.loads(SCHEMA.read_text())
    return dict(s["properties"]["metrics"]["properties"]["coldstart"]["properties"]["lazy"])


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--stages", "lint",
         "--out", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("extra", "says", "fix"), [
    (["--lazy", "soci"], "--lazy and --require-lazy measure beside the cold pull",
     "add --cold-start-registry"),
    (["--require-lazy"], "--lazy and --require-lazy measure beside the cold pull",
     "add --cold-start-registry"),
    (["--lazy", "soci", "--cold-start-registry", "127.0.0.1:5000", "--lazy-registry",
      "127.0.0.1:5443", "--registry-ca", "no-such-ca.pem"],
     "--registry-ca no-such-ca.pem: not a regular file", "give the PEM file"),
    (["--lazy", "soci", "--cold-start-registry", "127.0.0.1:5000", "--lazy-registry",
      "https://127.0.0.1:5443"], "--lazy-registry 'https://127.0.0.1:5443': not HOST or "
     "HOST:PORT", "give the registry's address"),
])
def test_bad_lazy_options_are_bad_input(tmp_path: Path, extra: list[str], says: str,
                                        fix: str) -> None:
    res = _run(tmp_path, *extra)
    assert res.returncode == 2, res.stderr
    first, hint = res.stderr.strip().splitlines()[-2:]
    assert first.startswith(f"servelab run: {says}"), first
    assert hint.startswith(f"  fix: {fix}"), hint
    assert "Traceback" not in res.stderr


def test_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    res = _run(tmp_path, "--lazy", "estargz", "--cold-start-registry", "127.0.0.1:5000")
    assert res.returncode == 2 and "invalid choice: 'estargz'" in res.stderr
    assert "Traceback" not in res.stderr


def _starts(settings: NodeSettings, client: Any, cu: Cleanup) -> NodeStarts:
    return NodeStarts(settings, run_id=cu.run_id, cleanup=cu, client=client)


@pytest.mark.docker
@pytest.mark.registry
def test_required_on_a_plain_http_registry_is_exit_3(docker_client: Any,
                                                     registry: str) -> None:
    settings = NodeSettings(registry, lazy=LazySettings(required=True))
    with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu, \
            pytest.raises(CapabilityError) as e:
        _starts(settings, docker_client, cu)
    assert e.value.exit_code == 3
    assert str(e.value).startswith(
        f"lazy pulling (--require-lazy) cannot be measured here: the cold-start registry "
        f"{registry} is plain HTTP and soci-snapshotter discovers an index only over HTTPS")


@pytest.mark.docker
@pytest.mark.registry
def test_not_required_it_is_recorded_as_not_measured(docker_client: Any, registry: str,
                                                     base_image: str) -> None:
    img = read_layers(RegistryClient(), ImageRef.parse(base_image))
    with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu:
        nodes = _starts(NodeSettings(registry, lazy=LazySettings()), docker_client, cu)
        got = nodes._lazy(img)
        assert nodes._lazy(img) == got  # no index was built, nothing pushed
    assert got is not None and got["lazy"] is False and got["pull_s"] is None
    assert got["notes"] == [f"lazy not measured: the cold-start registry {registry} is plain "
                            "HTTP and soci-snapshotter discovers an index only over HTTPS "
                            "(give --lazy-registry HOST:PORT, the same storage served over "
                            "TLS, and --registry-ca)"]
    jsonschema.validate(got, _lazy_schema())


@pytest.fixture
def own_copy(base_image: str) -> Iterator[ImageLayers]:
    ref = copy_image(base_image, f"servelab-lazy/{RUN}{secrets.token_hex(3)}/option")
    yield read_layers(RegistryClient(), ImageRef.parse(ref))
    RegistryClient().delete_manifest(ImageRef.parse(ref))


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.slow
@pytest.mark.usefixtures("root_only")
def test_through_node_starts_it_is_measured_and_its_index_removed(
        docker_client: Any, registry: str, own_copy: ImageLayers,
        lazy_registry: LazyRegistry, cold_settings: ColdSettings) -> None:
    settings = NodeSettings(registry, cold=cold_settings,
                            lazy=LazySettings(registry=lazy_registry))
    with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu:
        nodes = _starts(settings, docker_client, cu)
        assert nodes.lazy_fallback is None
        first = nodes._lazy(own_copy)
        second = nodes._lazy(own_copy)  # a second repeat: a fresh instance, the same index
        assert len(tags_of(own_copy)) == 2  # the image's tag and the referrers fallback tag
    assert cu.errors == []
    assert tags_of(own_copy) == ["t"]  # the index went with the run
    for got in (first, second):
        assert got is not None and got["lazy"] is True, got
        jsonschema.validate(got, _lazy_schema())
        assert got["index"]["digest"] == got["index_digest"]
        assert got["bytes_fetched"]["layers_full"] == 0  # the base's one layer is indexed
        # no start: the pull's own probe of the layer, nothing read through the mounts
        assert got["bytes_read"]["synchronous_bytes_served"] == 0
        assert got["notes"] == ["pull only: the server was not started on the lazy node (no "
                                "start spec given), so bytes fetched and read are the pull's "
                                "own, not those read before ready"]
        assert "start_outcome" not in got
    assert first["index"] == second["index"]


@pytest.mark.usefixtures("root_only")
def test_doctor_starts_the_snapshotter_for_real() -> None:
    from servelab.node.containerd import PREFIX, temp_parent
    from servelab.run.doctor import check_lazy_pulling

    before = sorted(temp_parent().glob(PREFIX + "doctor-*"))
    check = check_lazy_pulling()
    assert check.ok and not check.required, check
    assert check.detail.startswith("soci-snapshotter-grpc version ")
    assert "started as containerd's proxy snapshotter" in check.detail
    assert sorted(temp_parent().glob(PREFIX + "doctor-*")) == before


@pytest.mark.usefixtures("root_only")
def test_doctor_without_soci_says_why_and_how(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with the private containerd's tools but not soci's: a warning naming it."""
    import shutil

    from servelab.run.doctor import check_lazy_pulling

    for tool in ("containerd", "ctr", "unshare", "nsenter", "fusermount3", "sh"):
        found = shutil.which(tool)
        assert found is not None, tool
        (tmp_path / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tmp_path))
    check = check_lazy_pulling()
    assert not check.ok and not check.required
    assert check.detail.startswith("`soci` is not installed (Debian: apt-get install "
                                   "soci-snapshotter")
    assert "recorded as not measured" in check.fix


def test_the_specs_cold_start_adds_to_the_options(tmp_path: Path) -> None:
    from servelab import spec
    from servelab.run.options import RunOptions
    from servelab.run.stages import _node_settings, _with_spec

    exp = spec.load_experiment(ROOT / "tests" / "data" / "spec" / "valid" /
                               "native-coldstart-lazy.yaml")
    plain = _with_spec(RunOptions(out_dir=tmp_path), exp)
    # no node measured: the spec's lazy formats neither, but its requirement is checked as
    # --require-lazy is (one check for the spec and the CLI): no registry is bad input
    assert (plain.lazy, plain.require_lazy) == ((), True)
    with pytest.raises(InputError, match=r"need --cold-start-registry \(asked by "
                                         r"coldStart.lazyRequired\)"):
        _node_settings(plain)
    opts = _with_spec(RunOptions(out_dir=tmp_path, cold_start_registry="127.0.0.1:5000"), exp)
    assert (opts.lazy, opts.require_lazy, opts.lazy_min_layer_size) == (("soci",), True,
                                                                        4194304)
    settings = _node_settings(opts)
    assert settings is not None and settings.lazy is not None
    assert settings.lazy.required and settings.lazy.min_layer_size == 4194304
    assert settings.lazy.registry is None  # plain HTTP: resolve() says why at the start
    wins = _with_spec(RunOptions(out_dir=tmp_path, cold_start_registry="127.0.0.1:5000",
                                 lazy_min_layer_size=0), exp)
    assert wins.lazy_min_layer_size == 0


def test_a_temp_dir_too_long_for_the_sockets_is_named(tmp_path: Path) -> None:
    """containerd refuses unix socket paths over 104 characters: a long TMPDIR is a reason
    (cold and lazy fall back and say so), and a short enough one trims the dir's name."""
    from servelab.node.containerd import SOCKET_PATH_MAX, unavailable

    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    why = unavailable(deep)
    assert why is not None and why.startswith(f"the temp dir {deep} is too long a path for "
                                              "containerd's unix sockets")
    assert f"at most {SOCKET_PATH_MAX} characters" in why


def test_a_longer_temp_dir_trims_the_instance_name() -> None:
    import shutil
    import tempfile

    from servelab.node.containerd import SOCKET_PATH_MAX, PrivateContainerd, unavailable

    top = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    parent = top / ("d" * 30)  # about 47 characters: room for 12 of the run id
    parent.mkdir()
    try:
        assert unavailable(parent) is None or "too long" not in unavailable(parent)
        ctd = PrivateContainerd("a-run-id-of-forty-characters-exactly-xyz", parent=parent)
        sock = ctd.work / "containerd.sock.ttrpc"
        assert len(str(sock)) <= SOCKET_PATH_MAX, sock
        assert ctd.work.name.startswith("servelab-ctd-a-run-id-of")
        assert ctd.namespace == "servelab-a-run-id-of-forty-characters-exactly-xyz"
        ctd.stop()
        assert not ctd.work.exists()
    finally:
        shutil.rmtree(top)


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.slow
@pytest.mark.usefixtures("root_only")
def test_a_server_that_exits_on_the_lazy_node_leaves_its_last_lines(
        docker_client: Any, registry: str, own_copy: ImageLayers,
        lazy_registry: LazyRegistry, cold_settings: ColdSettings) -> None:
    from servelab.node import CtrStartSpec

    settings = NodeSettings(registry, cold=cold_settings,
                            lazy=LazySettings(registry=lazy_registry))
    spec = CtrStartSpec(8000, "/health", 30.0, args=[
        "python3", "-c",
        "print('starting'); print('no weights at /models/x'); raise SystemExit(3)"])
    with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu:
        got = _starts(settings, docker_client, cu)._lazy(own_copy, spec)
    assert cu.errors == []
    assert got is not None
    jsonschema.validate(got, _lazy_schema())
    assert got["start_outcome"] == "exited"
    assert got["start_log_tail"][-2:] == ["starting", "no weights at /models/x"]
    assert "its last line: no weights at /models/x" in got["notes"][-1]
