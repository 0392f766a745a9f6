"""The scheduler's brain: jobs in, Mesos actions out, no pymesos inside.

:class:`SchedulerCore` owns the queue, calls :func:`~dlc.scheduler.placement.placer.place`
on offers, turns status updates into job states (with retries), and answers
with :class:`Actions` (accept / decline / kill / revive / suppress) that the
framework adapter carries out on the driver. Tests and the benchmark drive it
with plain dicts.

Ordering that makes restarts safe: a job's tasks are saved as *staging* before
the ACCEPT is sent, so a scheduler that dies in between finds them on restart,
reconciles them, and re-queues a job whose task the master never saw (reason
``REASON_RECONCILIATION``) instead of launching anything twice.

Other rules (``docs/scheduler.md`` has the whole story):

* admission refuses what no known agent could ever run (:mod:`~dlc.scheduler.placement.inventory`)
  and a priority above the caller's grant;
* queued and active jobs live in memory (loaded once from the store), so an offer
  round costs the same with 20,000 finished jobs as with none;
* two locks: the core's, which offer rounds, status updates and kills of running jobs
  take (they stay serialised with each other), and the job book's
  (:mod:`~dlc.scheduler.core.job_book`), which alone is enough to submit, to kill a queued job
  and to read jobs, so none of those waits for an offer round. A round decides on the
  queue as it began and applies under the book's lock (a job killed meanwhile is not
  launched); admission reads facts frozen per inventory version
  (:mod:`~dlc.scheduler.tenancy.admission_facts`). Lock order: core, book, store;
* no job blocks the queue: a big job reserves a few agents for a bounded time
  (:mod:`~dlc.scheduler.jobs.queue`), and every waiting job has a reason;
* a kill is stored before it is acknowledged and re-sent until the task is over;
* a task that ended without proof its container stopped keeps its GPUs out of
  offers until that proof or a timeout (:mod:`~dlc.scheduler.tasks.draining`);
* ``TASK_UNREACHABLE`` is not an end: the job stays running until the master says.

:class:`SchedulerCore` is a thin facade: it builds one :class:`~dlc.scheduler.core.state.CoreState`
(the shared fields, over a job book, ``job_book``: jobs, queue, store write-through) and the
named components over it, one concern per module (:class:`~dlc.scheduler.core.elastic.Elastic`,
:class:`~dlc.scheduler.core.tenancy.TenancyOps`, :class:`~dlc.scheduler.core.share_hold.ShareHolds`,
:class:`~dlc.scheduler.core.consolidation.Consolidation`,
:class:`~dlc.scheduler.core.requests.Requests`, :class:`~dlc.scheduler.core.offers.OfferRound`,
:class:`~dlc.scheduler.core.status.StatusUpdates`, :class:`~dlc.scheduler.core.views.Views`,
:class:`~dlc.scheduler.core.usage.UsageReadings`, :class:`~dlc.scheduler.core.admin.Admin`),
and each public method is one line handing the call to the component that owns it. The
components take the locks themselves, as they did when they were mixins; which module holds
what is in :mod:`~dlc.scheduler.core.state`. Callers import :class:`SchedulerCore`,
:class:`CoreConfig` and :class:`Actions` from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from dlc.scheduler.core.admin import Admin, UnknownUser
from dlc.scheduler.core.config import (
    LIVE_STATES,
    Actions,
    CoreConfig,
    ImageResolver,
    default_resolver,
)
from dlc.scheduler.core.consolidation import Consolidation
from dlc.scheduler.core.elastic import Elastic
from dlc.scheduler.core.offers import OfferRound
from dlc.scheduler.core.ports import EngineCodec, JobStore, RoundSink
from dlc.scheduler.core.requests import Requests
from dlc.scheduler.core.share_hold import ShareHolds
from dlc.scheduler.core.state import CoreState
from dlc.scheduler.core.status import IgnoredUpdates, StatusUpdates
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.core.usage import UsageReadings
from dlc.scheduler.core.views import Views
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.cluster import AgentView
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import DriverCheck, TopologyOf
from dlc.scheduler.tasks.infra_loss import LostAttempts
from dlc.scheduler.tasks.usage import GpuUsage, JobUsage, UsageRollup
from dlc.scheduler.tenancy.fair_share import FairShare
from dlc.scheduler.tenancy.policy import (
    DEFAULT_POOL,
    AuditEntry,
    Policy,
    Resources,
    UserLimits,
)
from dlc.scheduler.tenancy.quotas import QueuePlan
from dlc.scheduler.tenancy.share_charge import GpuSizes
from dlc.scheduler.tenancy.user_holdings import UserHeld

__all__ = [
    "LIVE_STATES",
    "Actions",
    "CoreConfig",
    "ImageResolver",
    "SchedulerCore",
    "default_resolver",
]


class SchedulerCore:
    """Thread-safe job lifecycle and placement on top of a :class:`JobStore`.

    Built as :class:`~dlc.scheduler.core.state.CoreState` is (its docstring lists the
    arguments); each public method hands the call to the component that owns it.

    Attributes:
        state: the shared fields, the job book and the core's lock.
        elastic, tenancy_ops, share_holds, consolidation, requests, offer_round,
            status_updates, views, usage_readings, admin: the components, each built with
            the state and the components it calls (tests and benchmarks reach a part
            through its owner, e.g. ``core.state.book``).
    """

    def __init__(
        self,
        store: JobStore,
        config: CoreConfig | None = None,
        resolver: ImageResolver | None = None,
        topology_of: TopologyOf | None = None,
        driver_ok: DriverCheck | None = None,
        clock: Callable[[], float] = time.time,
        metrics: RoundSink | None = None,
        codec: EngineCodec | None = None,
    ):
        state = CoreState(store, config, resolver, topology_of, driver_ok, clock, metrics, codec)
        self.state = state
        self.elastic = Elastic(state)
        self.tenancy_ops = TenancyOps(state, self.elastic)
        self.share_holds = ShareHolds(state)
        self.consolidation = Consolidation(state, self.tenancy_ops)
        self.requests = Requests(state, self.tenancy_ops)
        self.offer_round = OfferRound(
            state, self.tenancy_ops, self.elastic, self.share_holds, self.consolidation
        )
        self.status_updates = StatusUpdates(state, self.tenancy_ops, self.elastic)
        self.views = Views(state)
        self.usage_readings = UsageReadings(state, self.tenancy_ops)
        self.admin = Admin(state, self.tenancy_ops)
        self._connect_metrics(metrics)

    def _connect_metrics(self, metrics: RoundSink | None) -> None:
        """Let the metrics read the agents, the jobs and the GPU usage from this core."""
        watch_jobs = getattr(metrics, "watch_jobs", None)
        if watch_jobs is not None:  # jobs and history through the core, never its store
            watch_jobs(self)
        watch = getattr(metrics, "watch_cluster", None)
        if watch is not None:  # the metrics read the agents from this core's inventory
            watch(self.cluster)
        watch_usage = getattr(metrics, "watch_usage", None)
        if watch_usage is not None:  # ... and the GPU usage from its usage book
            watch_usage(self)

    # -- the shared state's public fields -----------------------------------------

    @property
    def store(self) -> JobStore:
        """The job store (read once at start; written on every change)."""
        return self.state.store

    @property
    def metrics(self) -> RoundSink | None:
        """The monitoring sink, if any."""
        return self.state.metrics

    @property
    def config(self) -> CoreConfig:
        """The decisions' settings."""
        return self.state.config

    @config.setter
    def config(self, config: CoreConfig) -> None:
        """Replace the settings (the service sets the executor's once it knows it)."""
        self.state.config = config

    @property
    def inventory(self) -> Inventory:
        """What each agent has (totals), for admission and "impossible" reasons."""
        return self.state.inventory

    @property
    def tenancy(self) -> Policy:
        """The groups, quotas and limits in force."""
        return self.state.tenancy

    @property
    def framework_id(self) -> str | None:
        """The framework id the store keeps (``None`` before the first registration)."""
        return self.state.framework_id

    @property
    def ignored_updates(self) -> IgnoredUpdates:
        """The updates refused because they did not come from the task's agent and executor."""
        return self.status_updates.ignored_updates

    @property
    def lost_attempts(self) -> LostAttempts:
        """The attempts in flight that lost a task to the infrastructure."""
        return self.status_updates.lost_attempts

    # -- state --------------------------------------------------------------------

    def reload(self) -> None:
        """Read the queue, the active jobs, the ledger and evictions again (a new leader)."""
        self.tenancy_ops.reload()

    def visible_job(self, job_id: str, user: str, admin: bool = False) -> Job:
        """The job if the caller may see it (:meth:`CoreState.visible_job`)."""
        return self.state.visible_job(job_id, user, admin)

    def queued_jobs(self) -> list[Job]:
        """Queued jobs in placement order (from memory, as they are now)."""
        return self.state.queued_jobs()

    def has_queued(self) -> bool:
        """Whether any job waits for offers."""
        return self.state.has_queued()

    def set_framework_id(self, framework_id: str | None) -> None:
        """Persist the framework id before anything uses it (``None`` forgets it)."""
        self.state.set_framework_id(framework_id)

    # -- requests -----------------------------------------------------------------

    def submit(
        self, user: str, spec: JobSpec, max_priority: int | None = None, admin: bool = False
    ) -> Job:
        """Validate and queue a job (:meth:`Requests.submit`)."""
        return self.requests.submit(user, spec, max_priority=max_priority, admin=admin)

    def kill(self, job_id: str, user: str, admin: bool = False) -> tuple[Job, Actions]:
        """Kill a job the caller owns, an admin any (:meth:`Requests.kill`)."""
        return self.requests.kill(job_id, user, admin=admin)

    def kill_all(
        self,
        user: str,
        admin: bool = False,
        owner: str | None = "",
        states: frozenset[JobState] = LIVE_STATES,
    ) -> tuple[list[Job], Actions]:
        """Kill every live job of ``owner`` in ``states`` (:meth:`Requests.kill_all`)."""
        return self.requests.kill_all(user, admin=admin, owner=owner, states=states)

    def jobs_page(self, user: str, admin: bool, limit: int, before: str | None = None) -> list[Job]:
        """A page of the caller's jobs, newest first (:meth:`Requests.jobs_page`)."""
        return self.requests.jobs_page(user, admin, limit, before=before)

    # -- the offer round and status updates ---------------------------------------

    def on_offers(self, offers: list[dict[str, Any]]) -> Actions:
        """Decide on ``offers`` and carry the decision out (:meth:`OfferRound.on_offers`)."""
        return self.offer_round.on_offers(offers)

    def wants_offers(self) -> bool:
        """Whether offers are needed: a job waits, or an elastic gang could grow."""
        return self.elastic.wants_offers()

    def on_status(self, status: dict[str, Any]) -> Actions:
        """Fold one engine status update (Mesos: a v1 ``TaskStatus``), read through the core's
        codec, into its job (:meth:`StatusUpdates.on_status`)."""
        return self.status_updates.on_status(status)

    def reconcile_tasks(self) -> list[dict[str, Any]]:
        """The codec's reconciliation request (Mesos: ``{task_id, agent_id}`` each) for every
        task that may be alive (:meth:`StatusUpdates.reconcile_tasks`)."""
        return self.status_updates.reconcile_tasks()

    def pending_kills(self) -> Actions:
        """Kills to (re-)send (:meth:`StatusUpdates.pending_kills`)."""
        return self.status_updates.pending_kills()

    def consolidation_totals(self) -> tuple[int, float]:
        """``(jobs moved, GPU-hours they lost)`` since this core started."""
        return self.consolidation.totals()

    # -- tenancy ------------------------------------------------------------------

    def set_tenancy(self, policy: Policy) -> None:
        """Use new groups, quotas and limits from the next round on (admin changes)."""
        self.tenancy_ops.set_tenancy(policy)

    def active_jobs(self) -> list[Job]:
        """Jobs whose tasks may hold resources (staging, running, preempted)."""
        return self.tenancy_ops.active_jobs()

    def pool_capacity(self) -> dict[str, Resources]:
        """Pool -> totals of the known agents."""
        return self.tenancy_ops.pool_capacity()

    def gpu_sizes(self) -> GpuSizes:
        """The GPU sizes quotas charge memory shares against."""
        return self.tenancy_ops.gpu_sizes()

    def plan_queue(self, queue: list[Job] | None = None, rows: bool = True) -> QueuePlan:
        """Order, admit or hold the queued jobs by the tenancy policy (``dlc queue``)."""
        return self.tenancy_ops.plan_queue(queue, rows=rows)

    def user_holdings(self) -> dict[str, UserHeld]:
        """Each user with active jobs -> what they hold as their limits count it."""
        return self.tenancy_ops.user_holdings()

    def fair_share(self, viewer: str | None = None) -> FairShare | None:
        """Decayed GPU-hours per group and user (``None``: fair share off)."""
        return self.tenancy_ops.fair_share(viewer)

    # -- views --------------------------------------------------------------------

    def queue_reason(self, job_id: str) -> str | None:
        """Where a queued job stands and why it waits (``None``: not queued)."""
        return self.views.queue_reason(job_id)

    def get_job(self, job_id: str) -> Job:
        """One job, whoever owns it (:meth:`Views.get_job`)."""
        return self.views.get_job(job_id)

    def all_jobs(self) -> list[Job]:
        """Every stored job, oldest first."""
        return self.views.all_jobs()

    def job_history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        return self.views.job_history(job_id)

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        return self.views.state_events()

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid API token, else ``None``."""
        return self.views.authenticate(token)

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid API token, else ``None``."""
        return self.views.user_for_token(token)

    def update_agents(self, slaves: list[dict[str, Any]]) -> None:
        """Take agent totals from the master (``GET /master/slaves`` ``slaves`` list)."""
        self.views.update_agents(slaves)

    def cluster(self) -> list[AgentView]:
        """Every known agent, each GPU with its facts and state, by hostname."""
        return self.views.cluster()

    def cluster_agent(self, agent_id: str) -> AgentView | None:
        """One agent of :meth:`cluster`, or ``None``."""
        return self.views.cluster_agent(agent_id)

    def max_agent_gpus(self) -> int:
        """Most GPUs any known agent has (0 when no agent is known yet)."""
        return self.views.max_agent_gpus()

    def note_agent(self, agent_id: str, gpu_ids: set[int]) -> None:
        """Record GPUs an agent has (lower bound) for admission."""
        self.views.note_agent(agent_id, gpu_ids)

    def draining_gpus(self, agent_id: str) -> frozenset[int]:
        """GPUs of an agent held back until an ended task is confirmed gone."""
        return self.views.draining_gpus(agent_id)

    # -- GPU usage ----------------------------------------------------------------

    def on_usage(self, agent_id: str, data: str | bytes) -> int:
        """Keep an executor's usage report; returns how many tasks were kept."""
        return self.usage_readings.on_usage(agent_id, data)

    def job_usage(self, job_id: str) -> JobUsage | None:
        """What a running job's GPUs did lately (``None``: not running or not reported)."""
        return self.usage_readings.job_usage(job_id)

    def gpu_usage(self) -> dict[tuple[str, int], GpuUsage]:
        """(agent id, GPU index) -> the latest reading of a running task's GPU."""
        return self.usage_readings.gpu_usage()

    def usage_rollups(self, by: str, viewer: str | None = None) -> list[UsageRollup]:
        """Allocated versus used per ``user``, ``group`` or ``job`` over running jobs."""
        return self.usage_readings.usage_rollups(by, viewer)

    # -- admin --------------------------------------------------------------------

    def add_token(
        self,
        user: str,
        admin: bool = False,
        max_priority: int | None = None,
        expires_at: float | None = None,
    ) -> str:
        """A new API token for ``user``; returns it (the store keeps only its hash)."""
        return self.admin.add_token(user, admin, max_priority, expires_at)

    def create_group(
        self, name: str, actor: str, default_pool: str = DEFAULT_POOL, preempt_within: bool = False
    ) -> Policy:
        """Create (or update the settings of) a group; audited. Returns the new policy."""
        return self.admin.create_group(name, actor, default_pool, preempt_within)

    def add_member(self, group: str, user: str, actor: str) -> Policy:
        """Put ``user`` in ``group`` (moving them from any other); audited."""
        return self.admin.add_member(group, user, actor)

    def remove_member(self, group: str, user: str, actor: str) -> Policy:
        """Take ``user`` out of ``group``; audited."""
        return self.admin.remove_member(group, user, actor)

    def set_quota(
        self, group: str, pool: str, guaranteed: Resources, actor: str,
        ceiling: Resources | None = None,
    ) -> Policy:  # fmt: skip
        """Set a group's guarantee (and optional ceiling) in a pool; audited."""
        return self.admin.set_quota(group, pool, guaranteed, actor, ceiling=ceiling)

    def set_user_limits(self, limits: UserLimits, actor: str) -> Policy:
        """Set a user's caps (``None`` fields: no cap); audited."""
        return self.admin.set_user_limits(limits, actor)

    def update_user_limits(
        self, user: str, changes: Mapping[str, float | None], actor: str
    ) -> Policy:
        """Change only the caps named in ``changes`` (``None``: that cap removed), keep the
        user's others; audited."""
        return self.admin.update_user_limits(user, changes, actor)

    def unknown_user(self, user: str) -> UnknownUser | None:
        """``user`` when no token, group member or job of the cluster has that name (a limit
        on it limits nobody yet: a typo?), with the known names close to it; else ``None``."""
        return self.admin.unknown_user(user)

    def clear_user_limits(self, user: str, actor: str) -> bool:
        """Remove all of ``user``'s caps (audited where they had some); ``False``: they had
        none."""
        return self.admin.clear_user_limits(user, actor)

    def set_grace(self, seconds: float, actor: str) -> Policy:
        """The grace period of tasks launched from now on; audited."""
        return self.admin.set_grace(seconds, actor)

    def quota_audit(self, limit: int = 100) -> list[AuditEntry]:
        """The latest audited tenancy changes, newest first."""
        return self.admin.quota_audit(limit)
