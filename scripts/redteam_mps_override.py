#!/usr/bin/env python3
"""Red-team check (2026-11-23): can a job widen its own MPS memory share from inside?

DLC's MPS backend gives a share's memory cap to the container as the client variable
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (:func:`dlc.executor.sharing.render.mps_env`). The job owns
its environment: it can unset the variable or raise it. This starts ONE daemon through
:class:`MpsManager` for a 2,048 MiB share and asks 6,144 MiB three ways: with the env DLC gives,
without the variable, and with the variable raised. Needs one GPU, nvidia-cuda-mps-control and
``native/share_check`` built. Prints one JSON document; it changes no GPU setting.
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
from dlc.scheduler.jobs.launch_spec import GpuShare  # noqa: E402

CLIENT = str(ROOT / "native/share_check/build/share_check")


def ask(env: dict, mib: int) -> dict:
    done = subprocess.run([CLIENT, "alloc", str(mib), "--chunk", "64"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"stderr": done.stderr[-300:]}


def main() -> None:
    uuid = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    mps = MpsManager(tempfile.mkdtemp(prefix="dlc-mps-"))
    share = GpuShare(0, uuid, 2048, 0, "mps")
    daemon = mps.acquire("a", share)
    given = {**os.environ, **mps_env(share, daemon.pipe_dir)}
    out = {"gpu": uuid, "share_mib": 2048, "env": mps_env(share, daemon.pipe_dir)}
    try:
        time.sleep(1)
        out["as_given"] = ask(given, 6144)
        out["variable_unset"] = ask(
            {k: v for k, v in given.items() if k != "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}, 6144
        )
        out["variable_raised"] = ask(
            {**given, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=70000M"}, 6144
        )
    finally:
        mps.release("a", 0)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
