"""One container per GPU on a Docker engine, whatever crashed before (executor, agent, dlc local).

Every DLC container carries three labels besides its task identity, each written by the
executor (Docker would otherwise copy a same-named label from the user's image):

* ``dlc.gpus``: the comma-separated host GPU ids it holds whole (empty for CPU-only tasks and
  shares);
* ``dlc.gpu_share`` (set by :mod:`dlc.executor.sharing.render`; empty unless a share):
  ``GPU:MiB:milli:backend``, the one GPU the share runs on;
* ``dlc.executor_pid``: ``<pid>:<start time>`` of the executor process that owns it (the start
  time from ``/proc/<pid>/stat`` guards against a reused pid).

Before creating a container, the executor lists the engine's DLC containers and decides with
:func:`plan_claim` (pure): a container holding one of the wanted GPUs whose executor is gone is
an orphan (stop, remove, and start only once Docker confirms it is gone); one whose executor is
alive means the scheduler assigned the GPU twice, so the new task fails instead of overlapping.

A share claims its GPU too: against whole-GPU holders (and a whole-GPU task against shares), as
either way one of them would use a GPU the scheduler gave the other. Live shares of one GPU are
no conflict for each other (sharing is what they are for); an orphan share on the GPU is removed,
since the memory it holds is memory the scheduler believes free.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from dlc.scheduler.tasks.states import DOUBLE_ASSIGNMENT_PREFIX

#: host GPU ids a container holds, comma-separated
LABEL_GPUS = "dlc.gpus"
#: ``<pid>:<start time>`` of the executor process owning the container
LABEL_EXECUTOR_PID = "dlc.executor_pid"
#: container states in which a container may use its GPUs
_ACTIVE_STATES = frozenset({"created", "running", "restarting", "paused"})


def gpus_label(gpu_ids: Iterable[int]) -> str:
    """``"0,3"`` for GPUs 0 and 3 (the value of :data:`LABEL_GPUS`)."""
    return ",".join(str(int(g)) for g in gpu_ids)


def parse_gpus_label(text: str | None) -> frozenset[int]:
    """GPU ids of a :data:`LABEL_GPUS` value; unreadable parts are ignored."""
    out = set()
    for part in (text or "").split(","):
        part = part.strip()
        if _is_index(part):
            out.add(int(part))
    return frozenset(out)


def parse_share_gpu(text: str | None) -> frozenset[int]:
    """The GPU of a ``dlc.gpu_share`` value (``GPU:MiB:milli:backend``); empty if unreadable."""
    head = (text or "").partition(":")[0].strip()
    return frozenset({int(head)}) if _is_index(head) else frozenset()


def _is_index(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes ``²`` (which ``int`` refuses, so one
    label from a user's image failed every claim on the host) and other scripts' digits."""
    return text.isascii() and text.isdigit()


def process_start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time), or ``None`` if there is no live process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces: split after its closing parenthesis
    fields = stat.rpartition(")")[2].split()
    if fields and fields[0] in ("Z", "X"):  # a zombie has exited already
        return None
    return fields[19] if len(fields) > 19 else None


def executor_pid_label(pid: int | None = None) -> str:
    """The :data:`LABEL_EXECUTOR_PID` value of this process (or of ``pid``)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start_time(pid) or '?'}"


def owner_alive(label: str | None, start_time_of: Callable[[int], str | None]) -> bool:
    """Whether the executor named by a :data:`LABEL_EXECUTOR_PID` value still runs.

    A container without the label (made by an older DLC) counts as alive: DLC cannot tell, and
    refusing is safer than removing another executor's running job.
    """
    if not label:
        return True
    pid_text, _, started = label.partition(":")
    if not pid_text.isdigit():
        return True
    return start_time_of(int(pid_text)) == started


@dataclass(frozen=True)
class HeldGpus:
    """A DLC container as the claim sees it."""

    container_id: str
    name: str
    state: str
    gpu_ids: frozenset[int]
    owner_label: str | None
    task_id: str = ""
    #: the GPU a share container runs on (empty for whole-GPU and CPU-only containers)
    share_gpus: frozenset[int] = frozenset()


@dataclass
class ClaimPlan:
    """What to do before a container with the wanted GPUs may be created.

    Attributes:
        remove: orphan containers on those GPUs (stop and remove, then check again).
        conflicts: live containers of live executors on those GPUs (fail the task).
    """

    remove: list[HeldGpus] = field(default_factory=list)
    conflicts: list[HeldGpus] = field(default_factory=list)

    def conflict_message(self, wanted: Sequence[int]) -> str:
        """The TASK_FAILED message for a double assignment."""
        want = set(wanted)
        held = "; ".join(
            f"container {c.name} (task {c.task_id or '?'}) holds GPUs {sorted(c.gpu_ids & want)}"
            if c.gpu_ids & want
            else f"container {c.name} (task {c.task_id or '?'}) holds a share of GPU "
            f"{sorted(c.share_gpus & want)}"
            for c in self.conflicts
        )
        return (
            f"{DOUBLE_ASSIGNMENT_PREFIX}: {held} and its executor is still running; "
            "the task was not started (the scheduler will place it again)"
        )


def plan_claim(
    wanted: Iterable[int],
    containers: Iterable[HeldGpus],
    start_time_of: Callable[[int], str | None],
    own_container_ids: Iterable[str] = (),
    share: bool = False,
) -> ClaimPlan:
    """Decide, for each DLC container on a wanted GPU, whether to remove it, refuse, or let it be.

    Args:
        wanted: host GPU ids the new task needs (for a share: the one GPU it runs on).
        containers: DLC containers on this engine.
        start_time_of: :func:`process_start_time` (injectable for tests).
        own_container_ids: containers of this executor's own tasks (never orphans).
        share: the new task is a share of ``wanted``: live shares there are no conflict.
    """
    want = frozenset(int(g) for g in wanted)
    own = set(own_container_ids)
    plan = ClaimPlan()
    if not want:
        return plan
    for held in containers:
        whole = held.gpu_ids & want
        if not whole and not held.share_gpus & want:
            continue
        if held.container_id not in own and not owner_alive(held.owner_label, start_time_of):
            plan.remove.append(held)
        elif share and not whole:
            continue  # a live share beside a new share of the same GPU
        elif held.state in _ACTIVE_STATES:
            plan.conflicts.append(held)
        # an exited container of a live executor uses no GPU and is being removed by it
    return plan
