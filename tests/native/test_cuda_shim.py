"""The CUDA shim against the stub driver: accounting, refusal, cuMemGetInfo, several processes.

Every test runs real processes with ``libdlc_cuda_shim.so`` preloaded in front of a stub
``libcuda.so.1`` (``native/cuda_shim/test/fake_libcuda.c``: a 16 GiB GPU that hands out fake
addresses), so a limit the shim did not enforce shows as an allocation the stub granted.
"""

from __future__ import annotations

import signal

import pytest

from tests.native.shim_helpers import Client, shim_env, write_config

OOM = "err 2"  # CUDA_ERROR_OUT_OF_MEMORY
MODES = ("direct", "dlsym", "getproc", "getproc2", "rtldnext")
KINDS = ("mem", "pitch", "managed", "async", "pool", "vmm")


@pytest.fixture
def clients():
    started: list[Client] = []
    yield started
    for client in started:
        client.close()


@pytest.fixture
def share(tmp_path, shim_build, clients):
    """``start(mode)`` -> a client under a 4,096 MiB share (context 100 MiB) on one state file."""
    config = write_config(tmp_path / "shim.conf", tmp_path / "acct", 4096, context_mib=100)

    def start(mode: str = "direct", **env: str) -> Client:
        client = Client(shim_build, mode, shim_env(shim_build, config, **env))
        clients.append(client)
        assert client.ask("ctx") == "ok"
        return client

    return start


@pytest.mark.parametrize("mode", MODES)
def test_each_way_to_the_driver_is_limited(share, mode):
    """Linked, dlopen+dlsym, cuGetProcAddress (11.x and 12.x _v2) and RTLD_NEXT all meet the
    wrappers: past the share the allocation fails with the driver's out-of-memory error."""
    client = share(mode)
    assert client.info() == (4096 - 100, 4096)  # the context counted
    assert client.alloc(3000).startswith("ok")
    assert client.alloc(1000) == OOM  # 100 + 3000 + 1000 > 4096, though the GPU has 16 GiB
    assert client.info() == (4096 - 3100, 4096)
    assert client.alloc(996).startswith("ok")  # exactly up to the share
    assert client.info() == (0, 4096)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ("direct", "getproc2"))
def test_every_allocation_entry_point_counts_and_frees(share, kind, mode):
    client = share(mode)
    first = client.alloc(2000, kind)
    assert first.startswith("ok")
    assert client.alloc(2000, kind) == OOM
    assert client.ask(f"free {first.split()[1]}") == "ok"
    assert client.alloc(3900, kind).startswith("ok")  # the freed memory came back


def test_primary_context_is_counted_once(tmp_path, shim_build, clients):
    config = write_config(tmp_path / "c", tmp_path / "acct", 4096, context_mib=1000)
    client = Client(shim_build, "direct", shim_env(shim_build, config))
    clients.append(client)
    assert client.ask("retain") == "ok"
    assert client.ask("retain") == "ok"  # retained again: still one context
    assert client.info() == (3096, 4096)


def test_context_past_the_share_is_refused(tmp_path, shim_build, clients):
    config = write_config(tmp_path / "c", tmp_path / "acct", 500, context_mib=600)
    client = Client(shim_build, "direct", shim_env(shim_build, config))
    clients.append(client)
    assert client.ask("ctx") == OOM


def test_processes_share_one_limit(share):
    """Four processes of one container: their sum is held to the share, and each sees it."""
    procs = [share() for _ in range(4)]  # 4 contexts: 400 MiB
    for client in procs[:3]:
        assert client.alloc(1200).startswith("ok")  # 400 + 3600 = 4000
    assert procs[3].alloc(200) == OOM
    assert procs[3].alloc(96).startswith("ok")
    assert procs[0].info() == (0, 4096)
    assert procs[1].ask("free 0") == "ok"
    assert procs[3].info() == (1200, 4096)
    assert procs[3].alloc(1200).startswith("ok")


def test_memory_of_a_killed_process_is_reclaimed(share):
    """A process SIGKILLed while holding memory (no free, no exit handler): the next process
    gets the share back, since the driver freed that memory when the process died."""
    holder = share()
    assert holder.alloc(3500).startswith("ok")
    other = share()
    assert other.alloc(3500) == OOM
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait(timeout=10)
    assert other.alloc(3500).startswith("ok")
    assert other.info() == (4096 - 100 - 3500, 4096)


def test_reported_free_is_the_smaller_of_share_and_gpu(tmp_path, shim_build, clients):
    """cuMemGetInfo: free = min(driver's free, share - used), total = min(GPU, share)."""
    config = write_config(tmp_path / "c", tmp_path / "acct", 4096)
    small_gpu = shim_env(shim_build, config, STUB_CUDA_TOTAL_MIB="3000")
    client = Client(shim_build, "direct", small_gpu)
    clients.append(client)
    assert client.ask("ctx") == "ok"
    assert client.info() == (3000, 3000)
    assert client.alloc(3500) == "err 2"  # the driver's own refusal passes through


def test_without_a_config_nothing_is_limited(tmp_path, shim_build, clients):
    client = Client(shim_build, "dlsym", shim_env(shim_build, None))
    clients.append(client)
    assert client.ask("ctx") == "ok"
    assert client.alloc(10000).startswith("ok")
    assert client.info() == (16384 - 10000, 16384)


def test_without_a_state_file_each_process_is_limited(tmp_path, shim_build, clients):
    """No shared accounting (state_file unset): the limit still holds per process."""
    config = write_config(tmp_path / "c", None, 4096)
    a = Client(shim_build, "direct", shim_env(shim_build, config))
    clients.append(a)
    assert a.ask("ctx") == "ok"
    assert a.alloc(4097) == OOM
    assert a.alloc(4096).startswith("ok")


def test_memory_of_exited_processes_is_reclaimed(tmp_path, shim_build):
    """A process that exits without freeing (most do) leaves no count behind."""
    import subprocess  # noqa: PLC0415

    config = write_config(tmp_path / "c", tmp_path / "acct", 4096, context_mib=100)
    env = shim_env(shim_build, config)
    script = "ctx\nalloc mem 2000\ninfo\nquit\n"
    first = subprocess.run([str(shim_build.client), "direct"], input=script, env=env,
                           capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
    assert first.stdout.split("\n")[3] == "info 1996 4096"
    # the first process has exited: its 2,100 MiB are reclaimed for the next
    second = subprocess.run([str(shim_build.client), "direct"], input=script, env=env,
                            capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
    assert second.stdout.split("\n")[3] == "info 1996 4096"


def test_racing_processes_never_get_more_than_the_share_together(share):
    """Six processes allocate 1 MiB at a time as fast as they can, far past the share: the
    check and the count happen under one lock, so together they never pass it."""
    procs = [share() for _ in range(6)]  # 600 MiB of contexts
    for client in procs:
        client.proc.stdin.write("burst 2000 1\n")
    for client in procs:  # all start at once
        client.proc.stdin.flush()
    granted = [int(client.read().split()[1]) for client in procs]
    assert sum(granted) == 4096 - 600, granted  # never more, and nothing refused below it
    assert procs[0].info() == (0, 4096)


NEXT_LIB = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>
uid_t getuid(void) {  /* another interposer, loaded after the shim */
    uid_t (*next)(void) = (uid_t (*)(void))dlsym(RTLD_NEXT, "getuid");
    return next == getuid ? (uid_t)-1 : next() + 1000000;
}
"""
MAIN = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("%u\n", (unsigned)getuid()); return 0; }
"""


def test_rtld_next_keeps_its_meaning_for_other_libraries(tmp_path, shim_build):
    """The wrapped dlsym passes other names on as a tail call, so glibc still sees the real
    caller: an interposer loaded after the shim gets the NEXT getuid, not its own."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    (tmp_path / "next.c").write_text(NEXT_LIB)
    (tmp_path / "main.c").write_text(MAIN)
    lib, exe = tmp_path / "libnext.so", tmp_path / "main"
    for argv in (["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "next.c"), "-ldl"],
                 ["gcc", "-o", str(exe), str(tmp_path / "main.c")]):  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    env = {**shim_env(shim_build, None), "LD_PRELOAD": f"{shim_build.shim} {lib}"}
    out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=10)
    assert int(out.stdout) == os.getuid() + 1000000, out
