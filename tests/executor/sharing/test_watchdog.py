"""The memory watchdog against a fake NVML carrying the real H100's readings."""

from __future__ import annotations

import pytest

from dlc.executor.sharing.watchdog import (
    MemoryWatchdog,
    exceeded_message,
    gib_text,
    pids_from_cgroups,
    pids_from_top,
)
from dlc.scheduler.jobs.launch_spec import GpuShare

from .h100 import CLIENT_1GIB_MIB, MPS_CLIENT_1GIB_MIB, MPS_SERVER_MIB, FakeH100Nvml

UUID = FakeH100Nvml().uuid


def _watchdog(nvml, pids):
    seen = []
    dog = MemoryWatchdog(nvml, lambda cid: pids[cid], seen.append)
    return dog, seen


def test_a_share_that_counts_the_context_is_not_exceeded_by_1gib_of_data():
    # 1 GiB allocated reads as 1,542 MiB on the H100: within a 2 GiB share.
    nvml = FakeH100Nvml()
    nvml.procs = [(750, CLIENT_1GIB_MIB)]
    dog, seen = _watchdog(nvml, {"c1": {750}})
    dog.watch("t1", "c1", GpuShare(0, UUID, 2048, 0, "watchdog"))
    assert dog.check_once() == dog.check_once() == [] and seen == []


def test_over_its_share_for_two_samples_ends_the_task_with_a_readable_message():
    nvml = FakeH100Nvml()
    nvml.procs = [(750, CLIENT_1GIB_MIB), (751, 3885), (999, 20000)]  # 999: another container
    dog, seen = _watchdog(nvml, {"c1": {750, 751}})
    dog.watch("t1", "c1", GpuShare(0, UUID, 4096, 0, "watchdog"))
    assert dog.check_once() == []  # one sample over is a strike, not a kill
    (violation,) = dog.check_once()
    assert violation.used_mib == CLIENT_1GIB_MIB + 3885
    assert violation.message.startswith("used 5.3 GiB of its 4 GiB share on GPU 0")
    assert seen == [violation] and dog.watching() == []


def test_a_dip_between_samples_resets_the_strikes():
    nvml = FakeH100Nvml()
    dog, seen = _watchdog(nvml, {"c1": {750}})
    dog.watch("t1", "c1", GpuShare(0, UUID, 1024, 0, "watchdog"))
    for used in (CLIENT_1GIB_MIB, 600, CLIENT_1GIB_MIB, 600):
        nvml.procs = [(750, used)]
        assert dog.check_once() == []


def test_mps_server_memory_is_not_charged_to_a_tenant():
    nvml = FakeH100Nvml()
    nvml.procs = [(559, MPS_SERVER_MIB), (538, MPS_CLIENT_1GIB_MIB)]
    nvml.mps = {538}
    dog, seen = _watchdog(nvml, {"c1": {538}})
    dog.watch("t1", "c1", GpuShare(0, UUID, 1600, 0, "watchdog"))
    assert dog.used_mib([], dog._watched["t1"]) == 0
    dog.check_once()
    dog.check_once()
    assert seen == []


def test_no_sample_is_taken_when_nothing_is_watched_and_memoryless_shares_are_not_watched():
    nvml = FakeH100Nvml()
    dog, _ = _watchdog(nvml, {})
    dog.watch("t1", "c1", GpuShare(0, UUID, 0, 500, "watchdog"))
    assert dog.check_once() == [] and nvml.calls == []


@pytest.mark.parametrize("mib, text", [(4096, "4 GiB"), (5427, "5.3 GiB"), (512, "0.5 GiB")])
def test_gib_text(mib, text):
    assert gib_text(mib) == text


def test_message_names_gpu_and_fix():
    message = exceeded_message(5427, GpuShare(2, None, 4096, 0, "watchdog"))
    assert message.startswith("used 5.3 GiB of its 4 GiB share on GPU 2")
    assert "--gpu-memory" in message and "\n" not in message


def test_pids_from_docker_top():
    top = {
        "Titles": ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"],
        "Processes": [["65534", "4242", "4200", "0", "10:00", "?", "00:00:01", "python"]],
    }
    assert pids_from_top(top) == {4242}
    assert pids_from_top({"Titles": ["CMD"], "Processes": [["x"]]}) == set()


def test_pids_from_cgroups(tmp_path):
    cid = "0123456789ab" * 5
    for pid, text in [(10, f"0::/system.slice/docker-{cid}.scope\n"), (11, "0::/init.scope\n")]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    (tmp_path / "self").mkdir()
    assert pids_from_cgroups(cid, str(tmp_path)) == {10}


def test_the_run_of_dlc_backends_on_the_real_h100_reads_as_documented():
    """scripts/gpu_share_check.py's output on the H100: DLC's MpsManager, MPS env, watchdog."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    run = json.loads((Path(__file__).parent / "data" / "h100-dlc-share-check.json").read_text())
    assert run["gpu"] == "NVIDIA H100 80GB HBM3"
    assert run["env_a"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert run["env_a"]["CUDA_VISIBLE_DEVICES"].startswith("GPU-")
    assert run["a_over"]["refused"] and run["a_over"]["got_mib"] < 4096
    assert run["b_over"]["refused"] and run["b_over"]["got_mib"] < 2048
    assert run["b_within"]["got_mib"] == 1024 and not run["b_within"]["refused"]
    assert run["a_sms"]["sms_used"] == 32  # under a 25 % cap
    assert run["b_sms"]["sms_used"] == 132  # B has no compute cap: every SM of the H100
    ((task, used, message),) = run["watchdog"]
    assert task == "share-1024" and used > 1024 + 64
    assert message == exceeded_message(used, GpuShare(0, None, 1024, 0, "watchdog"))
    assert run["daemons_after_two_shares"] and run["after_first_release"]
    assert run["quit_sent"] and run["after_last_release"] == []
    assert run["ok"] is True  # the script's own verdict, the fixed SM criterion included
