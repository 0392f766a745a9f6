"""Elastic gangs (``--nodes MIN:MAX``): parsing, sizes, and who grows or shrinks (pure).

An elastic gang is gang-placed at ``MIN`` nodes exactly as a ``--nodes MIN`` job is (all or
nothing, gang topology honoured; quotas charge what it holds). Its nodes ``MIN`` to
``MAX - 1`` are *extra members*: launched one task each in a later offer round, from
capacity the round left over, on agents no waiting job of the same or higher priority could
use; given back
first (highest rank first) when a job of the same or higher priority waits for an agent they
hold, or when a quota reclaim picks the gang. An extra member that ends does not end the job:
the gang goes on at its new size. Node 0 is never an extra member, so the rendezvous at its
address stays up while the gang changes size (``torchrun --nnodes MIN:MAX`` re-rendezvouses:
docs/gangs.md).

Nothing here reads a clock, a store or Mesos; :mod:`~dlc.scheduler.core.elastic` carries
the decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dlc.errors import JobSpecError
from dlc.scheduler.gangs.topology import LEVELS, Locality, wanted

#: the largest gang (``--nodes`` and ``MAX``)
MAX_NODES = 1024
#: torchrun's restarts after a member leaves (a membership change by a joining node costs
#: none); a user's own ``PET_MAX_RESTARTS`` wins
DEFAULT_MAX_RESTARTS = 100
#: set for every member unless the job sets them: with torchrun's default (the rendezvous
#: store shared with the workers), a node joining a running gang waited 60 s for a
#: ``MASTER_ADDR`` key node 0 never wrote again and failed (torch 2.11, measured; node 0 keeps
#: the first round's bootstrap address); without the sharing it joined in seconds
TORCHRUN_DEFAULTS = {
    "PET_MAX_RESTARTS": str(DEFAULT_MAX_RESTARTS),
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
}

_HOW = '--nodes N or --nodes MIN:MAX (YAML nodes: 4, nodes: "2:4" or nodes: {min: 2, max: 4})'


def parse_nodes(value: Any, nodes_max: Any = None) -> tuple[Any, int | None]:
    """``(MIN or the raw N, MAX or None)`` from a spec's ``nodes`` (and ``nodes_max``) value.

    ``MIN`` is returned raw when the value is not elastic, for the ordinary whole-number
    check; ``MIN:MIN`` is a plain gang of ``MIN`` (``None`` for ``MAX``).

    Raises:
        JobSpecError: a malformed ``MIN:MAX`` or mapping, or ``MAX`` below ``MIN`` or above
            :data:`MAX_NODES`.
    """
    if isinstance(value, Mapping):
        unknown = sorted(str(k)[:20] for k in value if k not in ("min", "max"))
        if unknown or "min" not in value or "max" not in value:
            raise JobSpecError("nodes", f"a mapping needs exactly min and max; {_fix()}")
        low, high = _whole(value["min"], "MIN"), _whole(value["max"], "MAX")
    elif isinstance(value, str) and ":" in value:
        low_text, _, high_text = value.strip().partition(":")
        low, high = _whole(low_text, "MIN"), _whole(high_text, "MAX")
    elif nodes_max is not None:
        low, high = _whole(value if value is not None else 1, "MIN"), _whole(nodes_max, "MAX")
    else:
        return value, None
    if low < 1:
        raise JobSpecError("nodes", f"MIN must be at least 1, got {low}; {_fix()}")
    if high < low:
        raise JobSpecError("nodes", f"MAX ({high}) is below MIN ({low}); {_fix()}")
    if high > MAX_NODES:
        raise JobSpecError("nodes", f"MAX must be at most {MAX_NODES}, got {high}; {_fix()}")
    return low, (high if high > low else None)


def _whole(value: Any, name: str) -> int:
    text = (
        str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    )
    if not text.isdigit() or len(text) > 6:
        shown = repr(value)[:24]
        raise JobSpecError("nodes", f"{name} must be a whole number, got {shown}; {_fix()}")
    return int(text)


def _fix() -> str:
    return f"pass {_HOW}, 1 <= MIN <= MAX <= {MAX_NODES}"


# -- sizes -------------------------------------------------------------------------------


def is_elastic(spec: Any) -> bool:
    """Whether ``spec`` (a :class:`~dlc.scheduler.jobs.job.JobSpec`) is an elastic gang."""
    return getattr(spec, "nodes_max", None) is not None


def extras(job: Any) -> list[Any]:
    """The job's extra members (rank >= MIN), highest rank first: the first to give back."""
    return sorted((t for t in job.tasks if t.rank >= job.spec.nodes), key=lambda t: -t.rank)


def nodes_text(job: Any) -> str:
    """``3/2:4`` (members / MIN:MAX) for an elastic gang, ``4`` for a plain one."""
    spec = job.spec
    if not is_elastic(spec):
        return str(spec.nodes)
    return f"{len(job.tasks)}/{spec.nodes}:{spec.nodes_max}"


def next_rank(job: Any) -> int | None:
    """The lowest rank from MIN up that no member holds, or ``None`` at MAX."""
    held = {t.rank for t in job.tasks}
    for rank in range(job.spec.nodes, job.spec.nodes_max):
        if rank not in held:
            return rank
    return None


# -- growth -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiter:
    """A queued job that may take capacity from a gang's growth (or its extra members).

    Attributes:
        job_id: the queued job.
        priority: its priority.
        agents: ids of the agents able to run it (any agent: ``None``).
    """

    job_id: str
    priority: int
    agents: frozenset[str] | None = None

    def could_use(self, agent_id: str) -> bool:
        """Whether the job could run on ``agent_id``."""
        return self.agents is None or agent_id in self.agents


def growth_blocker(job: Any, waiters: Iterable[Waiter]) -> Waiter | None:
    """The first queued job of the same or higher priority that blocks ``job``'s growth."""
    return next((w for w in waiters if w.priority >= job.spec.priority), None)


def not_growing(job: Any, blocker: Waiter) -> str:
    """Why an elastic gang below MAX does not grow now, for ``dlc job``."""
    return (
        f"not growing: job {blocker.job_id} (priority {blocker.priority}) waits for capacity "
        f"and goes first"
    )


def member_order(
    agent_ids: Sequence[str],
    locality_of: Any,
    anchor: Locality,
    gang_topology: str | None,
) -> list[str]:
    """The agents a new member may go to, nearest to node 0 (``anchor``) first.

    A ``required`` gang topology keeps only the agents within that level of node 0; a
    preferred one orders by the narrowest shared level (switch, rack, zone, none).
    """
    want = wanted(gang_topology)

    def distance(agent_id: str) -> int:
        place = locality_of(agent_id)
        for index, level in enumerate(LEVELS):
            key = anchor.key(level)
            if key is not None and place.key(level) == key:
                return index
        return len(LEVELS)

    limit = LEVELS.index(want.level) if want.required else len(LEVELS)
    ranked = sorted(agent_ids, key=lambda a: (distance(a), a))
    return [a for a in ranked if distance(a) <= limit]


# -- shrink -------------------------------------------------------------------------------


def shrink_for(gangs: Iterable[Any], waiters: Sequence[Waiter]) -> list[tuple[Any, Any, str]]:
    """``(job, task, why)`` of extra members to give back: for each queued job that waits
    (highest priority first), one extra member of a gang of no higher priority that holds an
    agent the job could run on, lowest-priority gang and highest rank first. One member per
    waiting job per round: the next round sees whether that was enough."""
    pool = sorted(
        ((job, task) for job in gangs for task in extras(job)),
        key=lambda jt: (jt[0].spec.priority, -jt[1].rank, jt[0].job_id),
    )
    out: list[tuple[Any, Any, str]] = []
    taken: set[str] = set()
    for waiter in sorted(waiters, key=lambda w: -w.priority):
        for job, task in pool:
            if task.task_id in taken or job.spec.priority > waiter.priority:
                continue
            if not waiter.could_use(task.agent_id):
                continue
            taken.add(task.task_id)
            why = (
                f"shrinking: gave back node {task.rank} on {task.hostname} to job "
                f"{waiter.job_id} (priority {waiter.priority})"
            )
            out.append((job, task, why))
            break
    return out


# -- rendezvous ---------------------------------------------------------------------------


def elastic_env(
    rank: int, gpus_per_node: int, endpoint: str, low: int, high: int, rdzv_id: str
) -> dict[str, str]:
    """The variables of member ``rank`` of an elastic gang whose rendezvous is ``endpoint``
    (node 0's ``address:port``): torchrun's elastic form (``PET_NNODES=MIN:MAX``, the c10d
    rendezvous), and DLC's own."""
    address, _, port = endpoint.rpartition(":")
    return {
        "MASTER_ADDR": address,
        "MASTER_PORT": port,
        "NODE_RANK": str(rank),
        "NPROC_PER_NODE": str(gpus_per_node),
        "DLC_NODES_MIN": str(low),
        "DLC_NODES_MAX": str(high),
        "DLC_RDZV_ENDPOINT": endpoint,
        "PET_NNODES": f"{low}:{high}",
        "PET_NPROC_PER_NODE": str(gpus_per_node),
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": endpoint,
        "PET_RDZV_ID": rdzv_id,
    }
