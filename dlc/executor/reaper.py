"""The orphan reaper: removes an executor's containers when the executor process dies.

Containers are children of dockerd, not of the executor, so a SIGKILLed executor would leave
its containers running. ``dlc executor`` therefore starts this small watcher as a daemon: in
its own session and re-parented away from the executor (a double fork), so that neither a kill
of the executor's process group nor the agent's kill of the executor's process tree (Mesos's
posix launcher) reaches it. It polls the executor's pid; once the executor is gone it stops and
removes every container labelled with that framework and executor id, then exits. On an
orderly exit the executor has removed them already and the reaper finds nothing. Where the
agent kills the whole cgroup (cgroups isolation), ``dlc cleanup`` removes them instead.

Run as ``python -m dlc.executor.reaper --pid PID --framework-id F --executor-id E``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK


def process_start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time), or ``None`` if there is no such process.

    Comparing it guards against the pid being reused by another process.
    """
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces: split after its closing parenthesis
    fields = stat.rpartition(")")[2].split()
    if fields and fields[0] == "Z":  # a zombie has exited already
        return None
    return fields[19] if len(fields) > 19 else None


def watch(pid: int, framework_id: str, executor_id: str, poll_s=0.5, grace_s=5.0) -> int:
    """Wait for ``pid`` to exit, then remove its containers; returns how many were removed."""
    started = process_start_time(pid)
    while started is not None and process_start_time(pid) == started:
        time.sleep(poll_s)
    from dlc.executor.runtime import DockerRuntime

    runtime = DockerRuntime()
    found = runtime.list_containers({LABEL_FRAMEWORK: framework_id, LABEL_EXECUTOR: executor_id})
    return len(runtime.remove_all(found, grace_s))


def spawn(framework_id: str, executor_id: str, log_path: str | None = None) -> None:
    """Start a reaper daemon for the current process (returns once it is detached)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dlc.executor.reaper",
                "--daemonize",
                "--pid",
                str(os.getpid()),
                "--framework-id",
                framework_id,
                "--executor-id",
                executor_id,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
        launcher.wait(timeout=30)  # the launcher exits as soon as the daemon is forked
    finally:
        if log_path:
            out.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry of the reaper process."""
    parser = argparse.ArgumentParser(prog="python -m dlc.executor.reaper")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--framework-id", required=True)
    parser.add_argument("--executor-id", required=True)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--daemonize", action="store_true", help="fork; the parent exits at once")
    args = parser.parse_args(argv)
    if args.daemonize and os.fork() > 0:
        os._exit(0)  # the child is re-parented to init: off the executor's process tree
    from dlc.errors import DlcError

    try:
        removed = watch(args.pid, args.framework_id, args.executor_id, grace_s=args.grace)
    except DlcError as exc:
        print(f"dlc reaper: {exc}", file=sys.stderr)
        return 1
    if removed:
        print(f"dlc reaper: removed {removed} container(s) of executor {args.executor_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
