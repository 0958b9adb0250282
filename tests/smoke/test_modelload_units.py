"""servelab.smoke.modelload: the parsers, the page-cache eviction, the block-I/O reading, and
the GPU phases and lock of servelab.smoke.gpuphases (real files, real flock)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import CapabilityError
from servelab.smoke import gpuphases, modelload

IO_STAT_V2 = ("8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
              "254:0 rbytes=67108864 wbytes=8192 rios=512 wios=2 dbytes=0 dios=0\n")


def test_io_stat_sums_rbytes_over_devices() -> None:
    assert modelload.parse_io_stat(IO_STAT_V2) == 4096 + 67108864
    assert modelload.parse_io_stat("") == 0
    assert modelload.parse_io_stat("254:0 wbytes=5 rios=x rbytes=oops\n") == 0


def test_proc_io_read_bytes() -> None:
    text = ("rchar: 67188461\nwchar: 120\nsyscr: 30\nsyscw: 2\nread_bytes: 67203072\n"
            "write_bytes: 0\ncancelled_write_bytes: 0\n")
    assert modelload.parse_proc_io(text) == 67203072
    assert modelload.parse_proc_io("rchar: 1\n") is None


@pytest.mark.parametrize(("body", "want"), [
    (b'{"status": "ok", "model_bytes_read": 2147483739}', 2147483739),
    (b'{"status": "ok", "model": {"name": "m", "model_bytes_read": 12}}', 12),
    (b'{"status": "ok", "model": "tiny-linear"}', None),
    (b'{"model_bytes_read": "12"}', None),  # not an integer: not a count
    (b'{"model_bytes_read": true}', None),
    (b'{"model_bytes_read": -1}', None),
    (b"OK", None),
    (b"", None),
    (b"[1, 2]", None),
])
def test_server_reported_bytes(body: bytes, want: int | None) -> None:
    assert modelload.server_bytes(body) == want


def test_model_load_prefers_the_servers_count() -> None:
    ml = modelload.ModelLoad(model_bytes=100, block_read_bytes=40)
    assert (ml.bytes_read, ml.source) == (40, "block-io")
    ml.server_bytes = 100
    assert (ml.bytes_read, ml.source) == (100, "server")
    assert modelload.ModelLoad().to_dict()["source"] is None


def _cached_pages(path: Path) -> int:
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


@pytest.mark.skipif(shutil.which("fincore") is None, reason="fincore (util-linux) missing")
def test_evict_drops_the_models_files_from_the_page_cache(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "shards").mkdir(parents=True)
    data = model / "shards" / "w.bin"
    data.write_bytes(os.urandom(4 << 20))
    (model / "model.json").write_text("{}")
    assert _cached_pages(data) > 0  # just written: in the page cache
    res = modelload.evict_page_cache([model])
    assert (res.files, res.bytes, res.errors) == (2, (4 << 20) + 2, [])
    assert _cached_pages(data) == 0
    missing = modelload.evict_page_cache([tmp_path / "nope"])
    assert missing.files == 0


def test_block_bytes_from_proc_when_there_is_no_cgroup_v2_counter() -> None:
    value, source = modelload.read_block_bytes("not-a-container", [os.getpid()])
    assert isinstance(value, int) and value >= 0
    assert "/proc/<pid>/io" in source
    value, source = modelload.read_block_bytes("not-a-container", [2**22 + 7])
    assert value is None and "no cgroup v2 io.stat" in source


# ---------------------------------------------------------------------------- GPU phases


def test_phases_from_the_probe() -> None:
    probe = {"torch": {"import_s": 1.2, "cuda_init_s": 0.8,
                       "devices": [{"matmul": {"ok": True, "seconds": 0.05}}]}}
    assert gpuphases.phases(probe) == {"torch_import_s": 1.2, "cuda_init_s": 0.8,
                                       "first_kernel_s": 0.05}
    failed = {"torch": {"import_s": 1.0, "devices": [{"matmul": {"ok": False, "seconds": 9}}]}}
    assert gpuphases.phases(failed)["first_kernel_s"] is None
    assert gpuphases.phases(None) == {"torch_import_s": None, "cuda_init_s": None,
                                      "first_kernel_s": None}


def test_memory_freed_after_cleanup() -> None:
    ready: list[dict[str, Any]] = [{"index": 0, "memory_used_mib": 30000},
                                   {"index": 1, "memory_used_mib": 5}]
    after: list[dict[str, Any]] = [{"index": 0, "memory_used_mib": 1},
                                   {"index": 1, "memory_used_mib": None}]
    assert gpuphases.freed(ready, after) == [
        {"index": 0, "after_ready_mib": 30000, "after_cleanup_mib": 1, "freed_mib": 29999},
        {"index": 1, "after_ready_mib": 5, "after_cleanup_mib": None, "freed_mib": None}]


def test_lock_keys_are_the_gpus_the_container_gets() -> None:
    host = {"gpus": [{"index": 1, "uuid": "GPU-b"}, {"index": 0, "uuid": "GPU-a"},
                     {"index": 2}]}
    assert gpuphases.lock_keys(host, "all") == ["GPU-a", "GPU-b", "index-2"]
    assert gpuphases.lock_keys(host, 1) == ["GPU-a"]
    assert gpuphases.lock_keys(None, "all") == []


def test_one_run_per_gpu(tmp_path: Path) -> None:
    with gpuphases.gpu_lock(["GPU-a", "GPU-b"], timeout_s=5, directory=tmp_path) as held:
        assert held.keys == ["GPU-a", "GPU-b"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "servelab-gpu-GPU-a.lock", "servelab-gpu-GPU-b.lock"]
        # another run asking for one of those GPUs waits, then gives up with exit 3
        with pytest.raises(CapabilityError, match="held by another run") as e, \
                gpuphases.gpu_lock(["GPU-b"], timeout_s=0.5, directory=tmp_path):
            pass
        assert e.value.exit_code == 3
        # a GPU nobody holds is free
        with gpuphases.gpu_lock(["GPU-c"], timeout_s=0.5, directory=tmp_path) as other:
            assert other.waited_s < 0.5
    # released at the end of the block: the next run gets it at once
    with gpuphases.gpu_lock(["GPU-b"], timeout_s=0.5, directory=tmp_path) as again:
        assert again.to_dict()["paths"] == [str(tmp_path / "servelab-gpu-GPU-b.lock")]


def test_a_waiting_run_gets_the_gpu_when_it_is_released(tmp_path: Path) -> None:
    got: list[float] = []

    def second() -> None:
        with gpuphases.gpu_lock(["GPU-a"], timeout_s=10, directory=tmp_path) as lock:
            got.append(lock.waited_s)

    with gpuphases.gpu_lock(["GPU-a"], timeout_s=5, directory=tmp_path):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.6)
        assert got == []  # still waiting while the first holds it
    t.join(10)
    assert len(got) == 1 and got[0] >= 0.5


# ---------------------------------------------------------------------------- the example's model


def test_make_model_writes_sparse_or_random_shards(tmp_path: Path) -> None:
    import runpy

    mod = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "make_model.py"))
    assert mod["parse_size"]("4G") == 4 << 30 and mod["parse_size"]("512MiB") == 512 << 20
    with pytest.raises(Exception, match="not a size"):
        mod["parse_size"]("lots")
    files = mod["make_model"](tmp_path / "m", (3 << 30) + 5, shard=1 << 30, randomly=False)
    shards = sorted(p for p in files if p.name.startswith("weights-"))
    assert [p.name for p in shards][-1] == "weights-00004-of-00004.safetensors"
    assert sum(p.stat().st_size for p in shards) == (3 << 30) + 5
    assert sum(p.stat().st_blocks for p in shards) == 0  # sparse: no disk used
    assert (tmp_path / "m" / "model.json").is_file()
    # a smaller size later replaces every shard of the earlier one
    files = mod["make_model"](tmp_path / "m", 1000, shard=1 << 30, randomly=True)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "model.json", "weights-00001-of-00001.safetensors"]
    data = (tmp_path / "m" / "weights-00001-of-00001.safetensors").read_bytes()
    assert len(data) == 1000 and len(set(data)) > 100  # real bytes, not zeros
