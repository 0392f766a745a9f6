#!/usr/bin/env python3
"""DLC's own share backends on a real GPU: MpsManager, the MPS client env, the watchdog.

Needs one NVIDIA GPU, `nvidia-cuda-mps-control`, pynvml and `native/share_check` built
(`make -C native/share_check`). It changes no GPU setting and stops the daemon it starts.
Prints one JSON document; exit 0 when every check passed. Results are in docs/sharing.md and
tests/executor/sharing/data/h100-dlc-share-check.json (the 2026-11-23 run, ok: true).

1. MpsManager starts ONE daemon for two shares of GPU 0 (its own pipe/log folder, the GPU by
   UUID), and the clients use the env that render.mps_env gives a container;
2. share A (4096 MiB, 250 milli): a client holds 1 GiB; a second client of A asks 6 GiB and is
   refused under the limit;
3. share B (2048 MiB): a client asks 4 GiB and is refused under 2048;
4. A's compute share: kernel blocks land on about 25 % of the SMs (B, uncapped, on all);
5. the watchdog (real NVML) finds A's 1 GiB holder over a 1 GiB share (context counted) and
   not over a 2 GiB one, with the readable message;
6. after both shares are released the daemon is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlc.executor.sharing.mps import MpsManager  # noqa: E402
from dlc.executor.sharing.render import mps_env  # noqa: E402
from dlc.executor.sharing.watchdog import MemoryWatchdog  # noqa: E402
from dlc.scheduler.jobs.launch_spec import GpuShare  # noqa: E402

CLIENT = str(ROOT / "native/share_check/build/share_check")


def client(share_env: dict, *args: str) -> dict:
    done = subprocess.run(
        [CLIENT, *args],
        env={**os.environ, **share_env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "{}")


def live_mps() -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        if name.startswith("nvidia-cuda-mps") and text[text.rindex(")") + 2 :].split()[0] != "Z":
            found.append(name)
    return found


def main() -> int:
    import pynvml

    pynvml.nvmlInit()
    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    out: dict = {"gpu": pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))}
    mps = MpsManager(tempfile.mkdtemp(prefix="dlc-mps-"))
    share_a, share_b = GpuShare(0, uuid, 4096, 250, "mps"), GpuShare(0, uuid, 2048, 0, "mps")
    daemon = mps.acquire("a", share_a)
    mps.acquire("b", share_b)
    out["daemons_after_two_shares"] = sorted(set(live_mps()))
    env_a, env_b = mps_env(share_a, daemon.pipe_dir), mps_env(share_b, daemon.pipe_dir)
    out["env_a"] = env_a
    try:
        time.sleep(1)
        holder = subprocess.Popen(
            [CLIENT, "alloc", "1024", "--hold", "10"],
            env={**os.environ, **env_a},
            stdout=subprocess.PIPE,
            text=True,
        )
        out["a_holder"] = json.loads(holder.stdout.readline() or "{}")
        out["a_over"] = client(env_a, "alloc", "6144", "--chunk", "64")
        out["b_over"] = client(env_b, "alloc", "4096", "--chunk", "64")
        out["b_within"] = client(env_b, "alloc", "1024")
        out["a_sms"] = client(env_a, "sms")
        out["b_sms"] = client(env_b, "sms")  # B has no compute cap: every SM
        seen = []
        for memory in (1024, 2048):
            dog = MemoryWatchdog(pynvml, lambda cid: {holder.pid}, seen.append)
            dog.watch(f"share-{memory}", "c", GpuShare(0, uuid, memory, 0, "watchdog"))
            dog.check_once()
            dog.check_once()
        out["watchdog"] = [(v.task_id, v.used_mib, v.message) for v in seen]
        holder.wait(timeout=60)
    finally:
        mps.release("a", 0)
        out["after_first_release"] = sorted(set(live_mps()))
        out["quit_sent"] = mps.release("b", 0)
        time.sleep(1)
        out["after_last_release"] = live_mps()
    ok = (
        len(out["daemons_after_two_shares"]) >= 1
        and out["a_holder"].get("got_mib") == 1024
        and out["a_over"].get("refused")
        and out["a_over"].get("got_mib", 1e9) < 4096
        and out["b_over"].get("refused")
        and out["b_over"].get("got_mib", 1e9) < 2048
        and out["b_within"].get("got_mib") == 1024
        # under the cap the client also reports only its SMs as sm_count: compare with B
        and out["a_sms"].get("sms_used", 1e9) <= 0.3 * out["b_sms"].get("sms_used", 0)
        and [t for t, _, _ in out["watchdog"]] == ["share-1024"]
        and out["after_first_release"]
        and not out["after_last_release"]
    )
    out["ok"] = bool(ok)
    print(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
