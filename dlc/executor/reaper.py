"""The orphan reaper: removes an executor's containers when the executor process dies.

Containers are children of dockerd, not of the executor, so a SIGKILLed executor would leave
its containers running. ``dlc executor`` therefore starts this small watcher as a daemon: in
its own session and re-parented away from the executor (a double fork), so that neither a kill
of the executor's process group nor the agent's kill of the executor's process tree (Mesos's
posix launcher) reaches it. It polls the executor's pid; once the executor is gone it stops and
removes every container labelled with that framework and executor id (looking again for a few
seconds, for a create the executor sent just before it died), then exits. On an
orderly exit the executor has removed them already and the reaper finds nothing. Where the
agent kills the whole cgroup (cgroups isolation), ``dlc cleanup`` removes them instead.

Run as ``python -m dlc.executor.reaper --pid PID --framework-id F --executor-id E``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time

from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK
from dlc.executor.gpu_claim import LABEL_EXECUTOR_PID, owner_alive, process_start_time

log = logging.getLogger(__name__)


def end_framework_containers(runtime, framework_id: str, grace_s=5.0, timeout_s=60.0) -> int:
    """End everything a previous run of a framework left on this engine (``dlc local``).

    Each container's executor process (its ``dlc.executor_pid`` label, checked against the
    process start time) gets SIGTERM, each container is stopped and removed, and the call
    returns only once Docker lists none of the framework's containers any more.

    Returns:
        How many containers were removed.

    Raises:
        ContainerError: the engine failed, or containers were still listed after ``timeout_s``.
    """
    from dlc.errors import ContainerError

    removed = 0
    deadline = time.monotonic() + timeout_s
    while True:
        found = runtime.list_containers({LABEL_FRAMEWORK: framework_id})
        if not found:
            return removed
        if time.monotonic() > deadline:
            raise ContainerError(
                f"{len(found)} container(s) of framework {framework_id} still present after "
                f"{timeout_s:g} s; remove them with `dlc cleanup`"
            )
        for info in found:
            _terminate_owner(info.labels.get(LABEL_EXECUTOR_PID))
        removed += len(runtime.remove_all(found, grace_s))


def _terminate_owner(label: str | None) -> None:
    """SIGTERM the executor named by a ``dlc.executor_pid`` label if it is that live process."""
    if not label or not owner_alive(label, process_start_time):
        return
    pid = int(label.partition(":")[0])
    if pid == os.getpid():
        return
    try:
        os.kill(pid, signal.SIGTERM)
        log.info("sent SIGTERM to left-over executor process %d", pid)
    except OSError:
        pass


#: how long after the executor's death the reaper keeps looking: a ``docker create`` the
#: executor sent just before it died completes in dockerd afterwards (seen in the fault suite:
#: a container left in state ``created``)
LATE_CREATE_S = 8.0


#: written by the executor when it ends in order (its containers are gone): no second look
DONE_FILE = "dlc-executor.done"
_done_path: str | None = None


def mark_done() -> None:
    """Tell this process's reaper that the executor ended in order (see :func:`spawn`)."""
    if _done_path is not None:
        with contextlib.suppress(OSError), open(_done_path, "w"):
            pass


def watch(
    pid: int,
    framework_id: str,
    executor_id: str,
    poll_s=0.5,
    grace_s=5.0,
    late_s=LATE_CREATE_S,
    runtime=None,
    done_path: str | None = None,
) -> int:
    """Wait for ``pid`` to exit, then remove its containers, looking again for ``late_s``
    unless the executor marked an orderly end in ``done_path``; returns how many were
    removed."""
    started = process_start_time(pid)
    while started is not None and process_start_time(pid) == started:
        time.sleep(poll_s)
    if done_path is not None and os.path.exists(done_path):
        late_s = 0.0
    if runtime is None:
        from dlc.executor.runtime import DockerRuntime

        runtime = DockerRuntime()
    labels = {LABEL_FRAMEWORK: framework_id, LABEL_EXECUTOR: executor_id}
    removed = 0
    until = time.monotonic() + late_s
    while True:
        removed += len(runtime.remove_all(runtime.list_containers(labels), grace_s))
        if time.monotonic() >= until:
            return removed
        time.sleep(1.0)


def spawn(framework_id: str, executor_id: str, log_path: str | None = None) -> None:
    """Start a reaper daemon for the current process (returns once it is detached).

    With ``log_path``, :func:`mark_done` later writes :data:`DONE_FILE` beside it."""
    global _done_path
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    done = []
    if log_path:
        _done_path = os.path.join(os.path.dirname(log_path), DONE_FILE)
        done = ["--done-file", _done_path]
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
                *done,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
        launcher.wait(timeout=30)  # the launcher exits as soon as the daemon is forked
    finally:
        if not isinstance(out, int):  # a log file we opened (not DEVNULL)
            out.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry of the reaper process."""
    parser = argparse.ArgumentParser(prog="python -m dlc.executor.reaper")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--framework-id", required=True)
    parser.add_argument("--executor-id", required=True)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--done-file", help="an orderly end of the executor writes this file")
    parser.add_argument("--daemonize", action="store_true", help="fork; the parent exits at once")
    args = parser.parse_args(argv)
    if args.daemonize and os.fork() > 0:
        os._exit(0)  # the child is re-parented to init: off the executor's process tree
    from dlc.errors import DlcError

    try:
        removed = watch(
            args.pid,
            args.framework_id,
            args.executor_id,
            grace_s=args.grace,
            done_path=args.done_file,
        )
    except DlcError as exc:
        print(f"dlc reaper: {exc}", file=sys.stderr)
        return 1
    if removed:
        print(f"dlc reaper: removed {removed} container(s) of executor {args.executor_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
