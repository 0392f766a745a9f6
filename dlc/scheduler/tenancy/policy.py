"""Who shares the cluster and on what terms: groups, pools, quotas, user limits.

Pure data (no I/O): the store (:mod:`dlc.store.tenancy`) builds a :class:`Policy` from its
tables and the core decides with it (:mod:`dlc.scheduler.tenancy.quotas`). A *group* has
members and, per *pool* (a set of agents with the same ``dlc_pool`` attribute), a guaranteed
quota and an optional ceiling. Amounts are floats: a GPU share counts as its fraction of a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlc.errors import TenancyError

#: the agent attribute naming its pool (``dlc node-config --pool train``)
POOL_ATTRIBUTE = "dlc_pool"
#: the pool of agents without the attribute, and of jobs that name none
DEFAULT_POOL = "default"
#: the group of users who are in no group (guarantee 0: they only borrow)
NO_GROUP = "-"
#: default grace period of a preempted job (SIGTERM, then SIGKILL), seconds
DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class Resources:
    """GPUs (fractions allowed), CPUs and memory in MiB."""

    gpus: float = 0.0
    cpus: float = 0.0
    mem_mib: float = 0.0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus + other.gpus, self.cpus + other.cpus, self.mem_mib + other.mem_mib
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus - other.gpus, self.cpus - other.cpus, self.mem_mib - other.mem_mib
        )

    def fits(self, limit: Resources) -> bool:
        """Every amount is at most ``limit``'s (a tiny tolerance for float shares)."""
        eps = 1e-9
        return (
            self.gpus <= limit.gpus + eps
            and self.cpus <= limit.cpus + eps
            and self.mem_mib <= limit.mem_mib + eps
        )

    def over(self, limit: Resources) -> Resources:
        """What exceeds ``limit`` (0 where within)."""
        return Resources(
            max(0.0, self.gpus - limit.gpus),
            max(0.0, self.cpus - limit.cpus),
            max(0.0, self.mem_mib - limit.mem_mib),
        )

    def share_of(self, total: Resources) -> float:
        """The dominant share: the largest fraction of ``total`` any amount is (DRF)."""
        parts = [
            mine / whole
            for mine, whole in zip(
                (self.gpus, self.cpus, self.mem_mib),
                (total.gpus, total.cpus, total.mem_mib),
                strict=True,
            )
            if whole > 0
        ]
        return max(parts, default=0.0)

    def first_excess(self, limit: Resources) -> str | None:
        """The first resource above ``limit``, as ``GPUs``/``CPUs``/``memory`` (or None)."""
        for name, mine, cap in (
            ("GPUs", self.gpus, limit.gpus),
            ("CPUs", self.cpus, limit.cpus),
            ("memory", self.mem_mib, limit.mem_mib),
        ):
            if mine > cap + 1e-9:
                return name
        return None

    def amount(self, name: str) -> float:
        """The amount named as in :meth:`first_excess`."""
        return {"GPUs": self.gpus, "CPUs": self.cpus, "memory": self.mem_mib}[name]

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return {"gpus": self.gpus, "cpus": self.cpus, "mem_mib": self.mem_mib}


ZERO = Resources()


def fmt_span(seconds: float) -> str:
    """``8 h``, ``90 min``, ``45 s``: a limit as people write it."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def fmt(value: float, name: str = "GPUs") -> str:
    """``6``, ``2.5``, ``256G`` (memory in GiB when a whole number of them)."""
    if name == "memory":
        gib = value / 1024
        return f"{gib:g}G" if gib >= 1 else f"{value:g}M"
    return f"{round(value, 3):g}"


@dataclass(frozen=True)
class Quota:
    """A group's terms in one pool.

    Attributes:
        guaranteed: always available to the group (reclaimed from borrowers if needed).
        ceiling: the most the group may hold there, borrowing included (``None``: no cap).
    """

    group: str
    pool: str
    guaranteed: Resources = ZERO
    ceiling: Resources | None = None


@dataclass(frozen=True)
class Group:
    """A team: its members, the pool its jobs use by default, and whether a higher
    priority job of the group may preempt a lower one of the same group."""

    name: str
    members: frozenset[str] = frozenset()
    default_pool: str = DEFAULT_POOL
    preempt_within: bool = False


@dataclass(frozen=True)
class UserLimits:
    """Per-user caps (``None``: no cap).

    Attributes:
        max_running: jobs running at once (admission holds the next one).
        max_gpus: GPUs held at once, shares counted as fractions.
        max_interactive_s: the longest one interactive environment may run; the core's
            periodic kill pass stops it after that (:meth:`SchedulerCore.pending_kills`).
        max_interactive: interactive environments running at once.
        max_cpus: CPUs held at once over all the user's jobs (GPU jobs hold CPUs too), over
            all their nodes; what bounds a user's CPU-only jobs (``max_gpus`` does not).
        max_mem_mib: memory (MiB) held at once over all the user's jobs and nodes: a
            CPU-only job of little CPU and an agent's whole memory keeps that agent's GPUs
            from everyone as surely as one of all its CPUs (red-team finding 56).

    Both count what the tasks hold on the agents: the ask plus each task's executor
    (:func:`~dlc.scheduler.tenancy.held.on_agents`, red-team finding 57).
    """

    user: str
    max_running: int | None = None
    max_gpus: float | None = None
    max_interactive_s: float | None = None
    max_interactive: int | None = None
    max_cpus: float | None = None
    max_mem_mib: float | None = None


@dataclass(frozen=True)
class Policy:
    """Everything the multi-tenant rules read. An empty policy changes nothing."""

    groups: Mapping[str, Group] = field(default_factory=dict)
    quotas: Mapping[tuple[str, str], Quota] = field(default_factory=dict)
    limits: Mapping[str, UserLimits] = field(default_factory=dict)
    grace_s: float = DEFAULT_GRACE_S
    #: user -> group, derived from ``groups`` (not a constructor argument)
    _member_of: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        members: dict[str, str] = {}
        for group in self.groups.values():
            for user in group.members:
                members.setdefault(user, group.name)
        object.__setattr__(self, "_member_of", members)

    @property
    def enabled(self) -> bool:
        """Whether any rule applies (no groups, quotas or limits: the plain queue)."""
        return bool(self.groups or self.quotas or self.limits)

    def group_of(self, user: str) -> str:
        """The user's group (the first one listing them), or :data:`NO_GROUP`."""
        return self._member_of.get(user, NO_GROUP)

    def pool_of(self, user: str, pool: str | None) -> str:
        """The pool a job runs in: the one it names, else its group's default."""
        return self.charged_to(user, pool)[1]

    def charged_to(self, user: str, pool: str | None) -> tuple[str, str]:
        """The ``(group, pool)`` a job of ``user`` naming ``pool`` (or none) is charged to,
        the group looked up once."""
        group = self.group_of(user)
        if pool:
            return group, pool
        known = self.groups.get(group)
        return group, known.default_pool if known else DEFAULT_POOL

    def quota(self, group: str, pool: str) -> Quota:
        """The group's quota in the pool (guarantee 0, no ceiling when none is set)."""
        return self.quotas.get((group, pool)) or Quota(group, pool)

    def pools(self) -> set[str]:
        """Pools named by quotas or as group defaults."""
        return {p for _, p in self.quotas} | {g.default_pool for g in self.groups.values()}


@dataclass(frozen=True)
class AuditEntry:
    """One audited tenancy change (the store's ``quota_audit`` log; ``GET /v1/quota/audit``).

    Attributes:
        at: when (epoch seconds).
        actor: who made it (the admin's user name).
        action: what kind of change (``quota``, ``grace``, ``member-removed`` ...).
        detail: the change's fields, as stored (JSON).
    """

    at: float
    actor: str
    action: str
    detail: dict[str, Any]


def parse_mem(text: str | float | int, field: str = "mem") -> float:
    """``256G``, ``512M``, ``1T`` or a number of MiB -> MiB."""
    if isinstance(text, int | float):
        return float(text)
    raw = str(text).strip()
    units = {"T": 1024 * 1024, "G": 1024, "M": 1}
    try:
        if raw and raw[-1].upper() in units:
            value = float(raw[:-1]) * units[raw[-1].upper()]
        else:
            value = float(raw)
    except ValueError:
        raise TenancyError(
            field, f"{raw[:20]!r} is not a size; write e.g. 256G or 4096 (MiB)"
        ) from None
    if value < 0:
        raise TenancyError(field, f"{raw} is negative; give 0 or more")
    return value


def check_amounts(res: Resources, field: str = "quota") -> Resources:
    """Refuse negative or absurd amounts."""
    for name, value in (("gpus", res.gpus), ("cpus", res.cpus), ("mem", res.mem_mib)):
        if value < 0 or value != value or (value > 1e9 and value != float("inf")):
            raise TenancyError(f"{field}.{name}", f"{value:g} is out of range; give 0 or more")
    return res
