"""What :class:`~dlc.scheduler.core.facade.SchedulerCore` answers and how it is set up.

:class:`Actions` is the core's reply to every event (what the framework adapter does on the
driver); :class:`CoreConfig` holds the settings that shape its decisions. Both are
re-exported by :mod:`dlc.scheduler.core.facade`, where callers import them from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.round_cap import DEFAULT_JOBS_PER_ROUND
from dlc.scheduler.tasks.draining import DRAIN_TIMEOUT_S
from dlc.scheduler.tasks.launch import ExecutorConfig
from dlc.scheduler.tenancy.billing import BillingWeights
from dlc.scheduler.tenancy.fair_share import DEFAULT_HALF_LIFE_S
from dlc.scheduler.tenancy.preemption import ProtectionRules

#: (framework or None, image or None) -> (image, cuda_version); raises DlcError
#: the states ``dlc kill --all`` reaches (every state in which a job may still start or run)
LIVE_STATES = frozenset({JobState.QUEUED, JobState.STAGING, JobState.RUNNING, JobState.PREEMPTED})

ImageResolver = Callable[[JobSpec], tuple[str, str | None]]


@dataclass
class Actions:
    """What the framework adapter must do on the Mesos driver.

    Attributes:
        accepts: ``(offer_ids, task_infos)`` per agent.
        declines: offer ids to decline with the refuse filter.
        kills: ``(task_id, agent_id)`` to kill.
        revive: ask the master for offers again (new work queued).
        suppress: stop offers (nothing queued).
        soon: jobs the round cap did not consider still wait: decline without a refuse
            filter, so the offers come back at the master's next allocation, not after
            ``refuse_seconds`` (the cap bounds a round's work, not the launches per second).
        reconcile: ``(task_id, agent_id)`` whose state to ask the master for again (explicit
            reconciliation): an update of theirs was refused unread (``TaskUpdate.malformed``).
    """

    accepts: list[tuple[list[str], list[dict[str, Any]]]] = field(default_factory=list)
    #: offer ids -> RESERVE/UNRESERVE operations run in that ACCEPT before its launches (an
    #: entry whose offers launch nothing is an ACCEPT of its own); ``--reserve`` only
    operations: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=dict)
    declines: list[str] = field(default_factory=list)
    kills: list[tuple[str, str]] = field(default_factory=list)
    revive: bool = False
    suppress: bool = False
    #: roles no queued job can use (``--group-role``): suppressed while the others stay on
    suppress_roles: tuple[str, ...] = ()
    soon: bool = False
    reconcile: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class CoreConfig:
    """Scheduler settings that shape decisions.

    Attributes:
        placement: allocator policy and executor overheads.
        executor: how executors are launched.
        allowed_volumes: host path prefixes jobs may mount.
        max_skips: rounds a queued job is passed over before it reserves agents
            (:class:`~dlc.scheduler.jobs.queue.Reservations`).
        reservation_s: the longest a reservation holds its agents.
        drain_timeout_s: the longest GPUs of a task that ended without proof that its
            container stopped are kept out of offers.
        default_max_priority: the highest ``priority`` a user may set when the caller
            passes no grant (``None``: no limit).
        admin_max_priority: the same for admins (``None``: no limit).
        max_queued_per_user: queued (not yet started) jobs one user may have; the next
            submit is refused (``None`` or 0: no cap; admins are exempt). A red-team user
            queued 2,000 8-GPU jobs and held the whole cluster's queue.
        roles, reserve_idle_s, principal, group_roles: see the fields.
    """

    placement: PlacementConfig = PlacementConfig()
    executor: ExecutorConfig = ExecutorConfig()
    allowed_volumes: tuple[str, ...] = ()
    max_skips: int = 20
    reservation_s: float = 1800.0
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    default_max_priority: int | None = 0
    admin_max_priority: int | None = None
    max_queued_per_user: int | None = 1000
    #: the framework's Mesos roles: resources reserved for any other role are never taken
    #: (empty: whatever the master offered)
    roles: tuple[str, ...] = ()
    #: ``--reserve``: keep the GPUs DLC uses dynamically reserved for its role and release one
    #: after this many idle seconds (``None``: no dynamic reservations)
    reserve_idle_s: float | None = None
    #: the framework's principal, which Mesos wants on dynamic reservations
    principal: str | None = None
    #: ``(group, role)``: a group's jobs use only offers allocated to that Mesos role, so
    #: Mesos quota on the role guarantees the group's GPUs (``--group-role``; docs/roles.md)
    group_roles: tuple[tuple[str, str], ...] = ()
    #: jobs consolidation may move per rolling hour so that a job fragmentation denies gets
    #: its set (0: off; :mod:`~dlc.scheduler.placement.consolidation`, docs/scheduler.md)
    consolidation_moves_per_hour: int = 0
    #: ``--fair-share-half-life``: the half-life of each group's decayed GPU-hours, seconds
    #: (0: fair share over time off; borrowing by DRF on what is borrowed now, docs/quotas.md)
    fair_share_half_life_s: float = DEFAULT_HALF_LIFE_S
    #: ``--fair-share-billing``: CPUs and memory billed as one GPU (default: the cluster's
    #: ratios; :mod:`~dlc.scheduler.tenancy.billing`)
    fair_share_billing: BillingWeights = BillingWeights()
    #: how often the leader writes the fair-share ledger to the store, seconds
    fair_share_flush_s: float = 60.0
    #: queued jobs one offer round considers: the head of the queue and, in turns, the
    #: longest-waiting others (``None``: all; :mod:`~dlc.scheduler.placement.round_cap`,
    #: docs/scheduler.md)
    max_jobs_per_round: int | None = DEFAULT_JOBS_PER_ROUND
    #: ``--protect CLASS=MIN_RUNTIME[:DELAY]``: per priority class, the runtime before a job
    #: may be preempted and the delay from the decision to the eviction (none: as before)
    protection: ProtectionRules = ProtectionRules()


def default_resolver(spec: JobSpec) -> tuple[str, str | None]:
    """Resolve ``framework`` to an image with the catalog (``image`` wins when given).

    Raises:
        DlcError: unknown framework/version (the catalog lists the known ones).
    """
    if spec.image:
        return spec.image, spec.cuda_version
    from dlc.images import resolve

    # a validated spec has a framework when it has no image; "" fails as an unknown one
    entry = resolve(spec.framework or "", vendor=spec.gpu_vendor)
    return entry.image, entry.cuda


def image_vendor(spec: JobSpec, use_catalog: bool = True) -> tuple[str | None, str | None]:
    """``(vendor, rocm_version)`` a resolved spec's image implies (``None``: any / unknown).

    A catalog framework knows its vendor (ROCm builds: ``amd``); an explicit image is known
    only by a ``cuda_version`` (``nvidia``) or ``rocm_version`` (``amd``) the spec gives.
    ``use_catalog=False`` (a core built with its own resolver) skips the catalog.
    """
    if spec.framework and not spec.image and use_catalog:
        from dlc.images import resolve

        entry = resolve(spec.framework, vendor=spec.gpu_vendor)
        return entry.vendor, entry.rocm
    if spec.rocm_version:
        return "amd", spec.rocm_version
    return ("nvidia" if spec.cuda_version else None), None
