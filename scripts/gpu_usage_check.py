"""Allocated versus used on a real GPU: DLC's executor sampler reads a real CUDA load.

Run on a machine with an NVIDIA GPU (and pynvml) after ``make -C native/share_check`` and
``make -C native/p2p_probe`` (``make gpu-usage-check`` does both). Three phases on GPU 0, each
sampled once a second by :class:`dlc.executor.usage.UsageSampler` over the real pynvml, with
a pretend "container" whose pids are the load's own:

1. idle: nothing runs (the GPU must read as allocated but idle after a full window);
2. memory: ``share_check alloc 2048 --hold`` holds 2 GiB and does no work;
3. busy: the memory holder plus ``p2p_probe`` copying 1 GiB buffers in a loop.

Prints one table (one row per report) and writes it as JSON to ``$OUT/gpu-usage.json`` (or
``build/gpu-usage.json``). Exits 0 when the idle phase reads idle, the memory phase reads the
holder's memory against its pid, and the busy phase reads non-zero utilisation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlc.executor.usage import UsageSampler, load_nvml  # noqa: E402
from dlc.scheduler.tasks.usage import decode_report, is_idle  # noqa: E402

HOLD_MIB = 2048
PHASE_S = 8


def main() -> int:
    share_check = ROOT / "native/share_check/build/share_check"
    probe = ROOT / "native/p2p_probe/build/p2p_probe"
    pids: set[int] = set()
    reports: list[str] = []
    sampler = UsageSampler(load_nvml, reports.append, pids_of=lambda cid: pids, interval_s=1,
                           window=6, report_every=1)  # fmt: skip
    sampler.started("check", "pretend-container", [0])
    rows: list[dict] = []

    def phase(name: str, seconds: int) -> list[dict]:
        found = []
        for _ in range(seconds):
            seen = len(reports)
            deadline = time.monotonic() + 5
            while len(reports) == seen and time.monotonic() < deadline:
                time.sleep(0.05)  # the sampler's own thread reports once a second
            (task,) = decode_report(reports[-1], "local")
            gpu = task.gpus[0]
            found.append({"phase": name, "util_pct": gpu.util_pct, "util_max_pct": gpu.util_max_pct,
                          "mem_used_mib": gpu.mem_used_mib, "task_mem_mib": gpu.task_mem_mib,
                          "mem_total_mib": gpu.mem_total_mib, "samples": gpu.samples,
                          "idle": is_idle([gpu])})  # fmt: skip
        rows.extend(found)
        return found

    idle = phase("idle", PHASE_S)
    holder = subprocess.Popen([str(share_check), "alloc", str(HOLD_MIB), "--hold", "60"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    holder.stdout.readline()  # it holds the memory once it printed its line
    pids.add(holder.pid)
    memory = phase("memory", PHASE_S)
    loop = ["sh", "-c", f"while true; do {probe} --size 1G --iters 50 --repeats 3 >/dev/null; done"]
    load = subprocess.Popen(loop, start_new_session=True)  # its own group: killed as one
    time.sleep(2)  # the probe's first buffers are allocated
    busy = phase("busy", PHASE_S)
    os.killpg(load.pid, signal.SIGKILL)
    load.wait()
    holder.kill()
    holder.wait()
    sampler.stop()

    print(f"{'phase':7} {'util%':>6} {'max%':>5} {'dev MiB':>8} {'task MiB':>9} {'idle':>5}")
    for r in rows:
        print(f"{r['phase']:7} {r['util_pct']!s:>6} {r['util_max_pct']!s:>5} "
              f"{r['mem_used_mib']:>8} {r['task_mem_mib']!s:>9} {r['idle']!s:>5}")  # fmt: skip
    out = Path(os.environ.get("OUT") or ROOT / "build")
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-usage.json").write_text(json.dumps(rows, indent=1))
    ok = (
        idle[-1]["idle"]
        and memory[-1]["task_mem_mib"] is not None
        and memory[-1]["task_mem_mib"] >= HOLD_MIB
        and max(r["util_max_pct"] or 0 for r in busy) > 0
        and not busy[-1]["idle"]
    )
    print("gpu usage check:", "ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
