"""The ``shim`` backend: pure rendering of its mounts and config, its files on the agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlc.errors import ContainerError, DlcError
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.render import (
    SHIM_CONFIG_TARGET,
    SHIM_LIBRARY_TARGET,
    SHIM_PRELOAD_TARGET,
    SHIM_STATE_DIR,
    ShimFiles,
    apply_share,
    render_share,
    shim_config_text,
    shim_preload_text,
)
from dlc.executor.sharing.shim import ShimStore, find_library
from dlc.scheduler.jobs.launch_spec import GpuShare

SHARE = GpuShare(0, "GPU-aaaa", 4096, 250, "shim")
FILES = ShimFiles("/opt/dlc/libdlc_cuda_shim.so", "/run/t1/cuda-shim.conf", "/run/t1/ld.so.preload")


def test_shim_share_mounts_library_preload_and_config_read_only_and_a_tmpfs():
    args = render_share(SHARE, GpuStyle.TOOLKIT, shim=FILES)
    binds = {m["Target"]: m for m in args.mounts if m["Type"] == "bind"}
    assert binds[SHIM_LIBRARY_TARGET]["Source"] == FILES.library
    assert binds[SHIM_CONFIG_TARGET]["Source"] == FILES.config
    assert binds[SHIM_PRELOAD_TARGET]["Source"] == FILES.preload
    assert all(m["ReadOnly"] for m in binds.values())  # the job cannot rewrite its limit
    (tmpfs,) = [m for m in args.mounts if m["Type"] == "tmpfs"]
    assert tmpfs["Target"] == SHIM_STATE_DIR and tmpfs["TmpfsOptions"]["Mode"] == 0o1777
    assert args.ipc_mode is None  # no host IPC, unlike MPS
    assert "LD_PRELOAD" not in args.gpu.env  # loaded by ld.so.preload: unsetting does nothing
    assert args.gpu.env["DLC_GPU_SHARING"] == "shim"
    assert "CUDA_MPS_PIPE_DIRECTORY" not in args.gpu.env


def test_shim_config_limits_device_zero_to_the_share_and_counts_the_context():
    text = shim_config_text(SHARE, context_mib=300)
    lines = set(text.splitlines())
    assert {
        "limit_mib.0=4096",
        "context_mib=300",
        f"state_file={SHIM_STATE_DIR}/accounting",
    } <= lines
    assert shim_preload_text() == SHIM_LIBRARY_TARGET + "\n"


def test_compute_only_share_sets_no_memory_limit():
    text = shim_config_text(GpuShare(0, None, 0, 500, "shim"))
    assert "limit_mib" not in text


def test_shim_share_without_files_is_refused():
    with pytest.raises(DlcError, match="shim share"):
        render_share(SHARE, GpuStyle.TOOLKIT)


def test_apply_share_keeps_the_container_s_own_mounts():
    kwargs = apply_share(
        {"mounts": [{"Target": "/data"}]}, render_share(SHARE, GpuStyle.TOOLKIT, shim=FILES)
    )
    assert [m["Target"] for m in kwargs["mounts"]][0] == "/data"
    assert len(kwargs["mounts"]) == 5


def test_store_writes_readable_files_and_removes_them(tmp_path):
    library = tmp_path / "libdlc_cuda_shim.so"
    library.write_bytes(b"\x7fELF")
    store = ShimStore(str(tmp_path / "root"), str(library), context_mib=256)
    files = store.write("job 1/task#0", SHARE)
    assert files.library == str(library)
    assert "limit_mib.0=4096" in Path(files.config).read_text()
    assert Path(files.preload).read_text() == SHIM_LIBRARY_TARGET + "\n"
    assert os.stat(files.config).st_mode & 0o777 == 0o644
    assert os.path.dirname(files.config).startswith(str(tmp_path / "root"))
    assert "/" not in os.path.basename(os.path.dirname(files.config))[:-1]
    store.remove("job 1/task#0")
    assert not os.path.exists(os.path.dirname(files.config))


def test_store_without_a_built_library_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr("dlc.executor.sharing.shim.find_library", lambda env=None: None)
    with pytest.raises(ContainerError, match="make setup"):
        ShimStore(str(tmp_path)).write("t1", SHARE)


def test_find_library_prefers_the_environment(tmp_path):
    library = tmp_path / "x.so"
    library.write_bytes(b"")
    assert find_library({"DLC_CUDA_SHIM": str(library)}) == str(library)


def test_hook_writes_files_renders_mounts_and_cleans_up(tmp_path):
    library = tmp_path / "lib.so"
    library.write_bytes(b"")
    watched = []
    hook = ShareHook(
        nvml_factory=lambda: None, shim=ShimStore(str(tmp_path / "shim"), str(library))
    )

    class Watchdog:
        def watch(self, task_id, container_id, share):
            watched.append(task_id)

    hook._watchdog_started = Watchdog
    args = hook.prepare("t1", SHARE, GpuStyle.TOOLKIT, "580.159.04")
    sources = {m.get("Source") for m in args.mounts}
    assert str(library) in sources
    assert os.path.isfile(tmp_path / "shim" / "t1" / "cuda-shim.conf")
    hook.started("t1", "c1")  # the NVML watchdog stays on as the backstop
    assert watched == ["t1"]
    hook.finished("t1")
    assert not os.path.exists(tmp_path / "shim" / "t1")
