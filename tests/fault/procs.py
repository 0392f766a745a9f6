"""Find and signal the processes of one fault run by reading ``/proc`` (no psutil).

Every process a run starts carries ``DLC_FAULT_RUN=<run id>`` in its environment: ``dlc local``
and the scheduler get it directly, executors and their reapers inherit it (the emulator passes
its own environment on; the real agent gets it through ``MESOS_EXECUTOR_ENVIRONMENT_VARIABLES``).

The leak check does not rest on that marker alone: :func:`under` finds executors and reapers
by their working directory (their sandbox, inside the run's directory), so a marker that
stopped reaching them would not silence the check (and the executor-kill target, which finds
its victims by the marker, reports a kill point with no victim as a run error).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

MARKER = "DLC_FAULT_RUN"


@dataclass(frozen=True)
class Proc:
    """One live process of the run."""

    pid: int
    argv: tuple[str, ...]
    env: dict[str, str]

    @property
    def kind(self) -> str:
        """``executor``, ``reaper`` or ``other``."""
        joined = " ".join(self.argv)
        if "dlc.executor.reaper" in joined:
            return "reaper"
        if "-m dlc executor" in joined and not self.argv[0].endswith("sh"):
            return "executor"
        return "other"


def _alive(pid_dir: Path) -> bool:
    try:
        stat = (pid_dir / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has already ended


def run_processes(run_id: str) -> list[Proc]:
    """Live processes whose environment holds this run's marker."""
    needle = f"{MARKER}={run_id}".encode()
    found = []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            raw_env = (pid_dir / "environ").read_bytes()
            if needle not in raw_env:
                continue
            argv = tuple(
                a.decode(errors="replace")
                for a in (pid_dir / "cmdline").read_bytes().split(b"\0")
                if a
            )
        except OSError:
            continue
        if not _alive(pid_dir):
            continue
        env = dict(
            item.decode(errors="replace").partition("=")[::2]
            for item in raw_env.split(b"\0")
            if item
        )
        found.append(Proc(int(pid_dir.name), argv, env))
    return found


def under(root: Path) -> list[Proc]:
    """Live ``dlc executor`` and reaper processes whose working directory is inside ``root``
    (found without the run's marker)."""
    found = []
    prefix = str(Path(root).resolve())
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(pid_dir / "cwd")
            argv = tuple(
                a.decode(errors="replace")
                for a in (pid_dir / "cmdline").read_bytes().split(b"\0")
                if a
            )
        except OSError:
            continue
        proc = Proc(int(pid_dir.name), argv, {})
        inside = cwd == prefix or cwd.startswith(prefix + "/")
        if inside and proc.kind != "other" and _alive(pid_dir):
            found.append(proc)
    return found


def executors(run_id: str) -> list[Proc]:
    """The run's live ``dlc executor`` processes (not their ``sh -c`` parents), by executor id."""
    procs = [p for p in run_processes(run_id) if p.kind == "executor"]
    return sorted(procs, key=lambda p: p.env.get("MESOS_EXECUTOR_ID", ""))


def kill(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal ``pid``; False when it is already gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True
