"""The core's state and its bookkeeping: the one object every part of the core shares.

:class:`~dlc.scheduler.core.facade.SchedulerCore` is a thin locked facade over named components,
one module each, every one built on the same :class:`CoreState` (passed in, never inherited)
and on the few other components it really calls (passed in too, never reached through the
facade):

* :mod:`~dlc.scheduler.core.state` (this): construction of the shared fields, the core's
  memory of each job beside the job book, job lookup, the round's pinned queue;
* :mod:`~dlc.scheduler.core.elastic` (:class:`~dlc.scheduler.core.elastic.Elastic`): elastic
  gangs' growth and shrink;
* :mod:`~dlc.scheduler.core.tenancy` (:class:`~dlc.scheduler.core.tenancy.TenancyOps`): groups,
  quotas, preemption, interactive time limits, the admission facts;
* :mod:`~dlc.scheduler.core.share_hold` (:class:`~dlc.scheduler.core.share_hold.ShareHolds`):
  the share hold's and whole-GPU scoring's facts;
* :mod:`~dlc.scheduler.core.consolidation`
  (:class:`~dlc.scheduler.core.consolidation.Consolidation`): moves for a fragmented job;
* :mod:`~dlc.scheduler.core.requests` (:class:`~dlc.scheduler.core.requests.Requests`):
  submit (admission) and kills;
* :mod:`~dlc.scheduler.core.offers` (:class:`~dlc.scheduler.core.offers.OfferRound`): the
  offer round (decide, launch, echo, reserve, reasons);
* :mod:`~dlc.scheduler.core.status` (:class:`~dlc.scheduler.core.status.StatusUpdates`):
  status updates, retries, refusals, reconciliation;
* :mod:`~dlc.scheduler.core.views` (:class:`~dlc.scheduler.core.views.Views`): reads for the
  API and the dashboard, agents;
* :mod:`~dlc.scheduler.core.usage` (:class:`~dlc.scheduler.core.usage.UsageReadings`):
  allocated versus used GPU readings;
* :mod:`~dlc.scheduler.core.admin` (:class:`~dlc.scheduler.core.admin.Admin`): tokens and
  tenancy settings the API writes through.

The queued and active jobs, the per-user queue counters and the store write-through are
not this object's fields: they are :class:`~dlc.scheduler.core.job_book.JobBook`'s (:attr:`book`),
under its own short lock, so that submits, kills of queued jobs and job reads never wait for
an offer round. :attr:`CoreState.queued` reads the queue an offer round pinned while one runs
(it decides on that copy; jobs submitted meanwhile wait for the next round), else the book's
as it is. Whatever else the components share (drains, reservations, reasons, tenancy policy)
is the round's memory here, under the core's lock :attr:`CoreState.lock`; lock order is core,
then book, then store.

Why one shared state object and not a state bag split into mixins: every component reads and
writes the same dozen fields under one lock, so they live in one place, and each component
says in its constructor which other components it calls; the import graph is then the call
graph (``state`` < ``elastic`` < ``tenancy`` < the others < ``facade``), with no cycle and
no component reaching another through :class:`~dlc.scheduler.core.facade.SchedulerCore`
(``.importlinter``'s ``core-components`` contract keeps that order).

The module-level helpers with a leading underscore are shared by the modules of this package
only; they are not an API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar, cast

from dlc.errors import JobNotFound
from dlc.scheduler.core.config import CoreConfig, ImageResolver, default_resolver
from dlc.scheduler.core.job_book import JobBook, QueueView
from dlc.scheduler.core.offer_views import IdleOffers, OfferParser
from dlc.scheduler.core.ports import (
    EngineCodec,
    JobStore,
    ReservationKeeper,
    RoundSink,
    default_codec,
)
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement
from dlc.scheduler.jobs.queue import Reservations
from dlc.scheduler.placement.cluster import Holder
from dlc.scheduler.placement.inventory import AgentTotals, Inventory, Overheads
from dlc.scheduler.placement.model import DriverCheck, OfferView, TopologyOf
from dlc.scheduler.placement.round_cap import RoundCap
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.shape_cache import ShapeBudget
from dlc.scheduler.tasks.draining import Drains
from dlc.scheduler.tasks.refusals import Refusals
from dlc.scheduler.tasks.states import NOT_RUNNING_STATES
from dlc.scheduler.tasks.usage import UsageBook
from dlc.scheduler.tenancy.admission_facts import AdmissionFacts
from dlc.scheduler.tenancy.job_groups import JobGroups
from dlc.scheduler.tenancy.policy import Policy
from dlc.scheduler.tenancy.share_charge import GpuSizes

#: task states in which nothing of the task runs any more (no kill needed)
_TERMINAL_TASK = NOT_RUNNING_STATES
#: how many specs' impossibility answers are kept before they start again (jobs come and go)
_SPECS_KEPT = 100_000
#: how a message of a job the core itself stopped begins (kept as its final message)
_STOPPED = "stopped: "

_T = TypeVar("_T")


def task_ended(task: TaskPlacement) -> bool:
    """Whether ``task`` reached a terminal state (it holds nothing on its agent)."""
    return task.state in _TERMINAL_TASK


class CoreState:
    """The fields every component of the core shares, and how they follow the store.

    Args:
        store: persistence (read once at start; written on every change).
        config: decisions' settings.
        resolver: framework -> image lookup (default: :mod:`dlc.images`).
        topology_of, driver_ok: passed to :func:`place` (defaults there).
        clock: time source.
        metrics: optional monitoring sink (:mod:`dlc.api.metrics`).
        codec: reads the engine's offers, agents and status updates and writes its launch
            and reconciliation messages (:class:`~dlc.scheduler.core.ports.EngineCodec`; the Mesos
            one is :class:`dlc.mesos.codec.MesosCodec`). ``None``: the default an engine adapter
            registered (:func:`~dlc.scheduler.core.ports.default_codec`, which raises when none
            did); the core never picks an engine itself.
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
        self.store = store
        self.metrics = metrics
        # read-only (:attr:`codec`): the offer parser and the idle offers hold its methods
        self._codec = codec if codec is not None else default_codec()
        config = config or CoreConfig()
        placement = config.placement
        # One source for the executor's overhead: what placement reserves per task is what
        # each ExecutorInfo asks for.
        executor = replace(
            config.executor, cpus=placement.executor_cpus, mem_mib=placement.executor_mem_mib
        )
        self.config = replace(config, executor=executor)
        self.resolver = resolver or default_resolver
        self.topology_of = topology_of
        self.driver_ok = driver_ok
        self.clock = clock
        self.lock = threading.RLock()
        placement = self.config.placement
        #: what each agent HAS (totals), for admission and "impossible" reasons
        self.inventory = Inventory(Overheads.of(placement), topology_of, driver_ok)
        self.reservations = Reservations(self.config.max_skips, self.config.reservation_s)
        self.drains = Drains(self.config.drain_timeout_s)
        self.refusals = Refusals()
        #: each agent's offer parsed once while it offers the same
        #: (dlc/scheduler/core/offer_views.py)
        self.offer_parser = OfferParser(self.codec)
        #: offers of rounds with nothing queued, learnt from when first read (core/offer_views.py)
        self.idle_offers = IdleOffers(self.codec.offer_ids)
        #: per agent what placement derived from an unchanged offer
        #: (dlc/scheduler/placement/round_memo.py)
        self.round_memo = RoundMemo()
        #: (inventory version, the agents with the master's exact totals then)
        self.exact_ids: tuple[int, frozenset[str]] = (-1, frozenset())
        #: failed placement attempts per user per round, in turn
        #: (dlc/scheduler/placement/shape_cache.py)
        self.shape_budget = ShapeBudget(placement.shape_tries_per_user)
        #: at most so many queued jobs considered per round, in turns (placement/round_cap.py)
        self.round_cap = RoundCap(self.config.max_jobs_per_round)
        idle_s = self.config.reserve_idle_s
        self.reserver: ReservationKeeper | None = (
            None if idle_s is None else self.codec.reserver(idle_s, self.config.principal)
        )
        #: queued and active jobs, written through to the store, under their own lock
        self.book = JobBook(store, clock)
        #: the queue an offer round in progress decides on (``None`` between rounds)
        self.pinned: QueueView | None = None
        #: the admission facts of one inventory version, read by submits without the lock
        self.admission = AdmissionFacts(-1, Inventory(), {}, GpuSizes())
        self.reasons: dict[str, str] = {}
        #: job id -> when the share hold first held it (dlc/scheduler/core/share_hold.py)
        self.share_held_since: dict[str, float] = {}
        #: facts computed from the inventory (pool capacity, GPU sizes) with its version
        self.inventory_facts: dict[str, tuple[int, object]] = {}
        self._impossible: dict[tuple[object, ...], str | None] = {}
        self._impossible_version = -1
        #: id of a spec -> (the spec, its answer): the same answers without building a key
        self._impossible_of_spec: dict[int, tuple[JobSpec, str | None]] = {}
        self.previous: dict[str, tuple[str, tuple[int, ...]]] = {}
        #: job id -> when its current run was launched (victims youngest first; the
        #: interactive time limit)
        self.started: dict[str, float] = {}
        #: each job's (group, pool) under the policy, made anew by every round's queue plan
        #: (:mod:`~dlc.scheduler.tenancy.job_groups`)
        self.round_groups: JobGroups | None = None
        #: the latest GPU reading of each running task (memory only: dlc/scheduler/tasks/usage.py)
        self.usage = UsageBook()
        self.framework_id: str | None = store.framework_id
        # Groups, quotas and limits (docs/quotas.md); a store without tenancy tables (or an
        # empty policy) keeps the plain priority queue.
        loader = getattr(store, "tenancy_policy", None)
        self.tenancy: Policy = loader() if callable(loader) else Policy()
        self._load()

    @property
    def codec(self) -> EngineCodec:
        """The engine's offers and updates in, its launch messages out (the core parses and
        builds no engine JSON itself). Fixed for the core's life: the offer parser and the
        idle offers were built with its methods."""
        return self._codec

    def groups(self) -> JobGroups:
        """Each job's group and pool as this round resolved them (a policy changed since,
        or no round yet: a new map for the policy in force)."""
        groups = self.round_groups
        if groups is None or groups.policy is not self.tenancy:
            groups = self.round_groups = JobGroups(self.tenancy)
        return groups

    @property
    def queued(self) -> QueueView:
        """The queued jobs: in an offer round, the queue it decides on (:meth:`pin_queue`),
        else the book's as it is now (a frozen copy)."""
        pinned = self.pinned
        return pinned if pinned is not None else self.book.view()

    @property
    def active(self) -> dict[str, Job]:
        """The staging, running and preempted jobs (changed only under the core's lock)."""
        return self.book.active

    def reload(self) -> None:
        """Forget the in-memory queue and active set and read them again (a standby that
        has just been elected leader: another instance wrote the store meanwhile)."""
        with self.lock, self.book.lock:
            self.book.clear()
            self.reasons.clear()
            self.framework_id = self.store.framework_id
            self._load()

    def _load(self) -> None:
        """Read the queued and active jobs once (the only full read of the store)."""
        for job in self.store.list_jobs(
            states={JobState.QUEUED, JobState.STAGING, JobState.RUNNING, JobState.PREEMPTED}
        ):
            if job.state.active:  # a restart: the run started at its last launch
                launched = [at for at, state, _ in self.store.history(job.job_id)
                            if state == JobState.STAGING.value]  # fmt: skip
                if launched:
                    self.started[job.job_id] = launched[-1]
            self.track(job)

    def running_tasks(self) -> Iterator[tuple[Job, TaskPlacement, Holder]]:
        """``(job, task, holder)`` for every task of an active job that has not ended."""
        for job in self.active.values():
            for task in job.tasks:
                if not task_ended(task):
                    yield job, task, Holder(job.job_id, task.task_id, job.user)

    def track(self, job: Job) -> Job:
        """Keep the book, and what the core keeps per job, in step with a stored job.
        Under the core's lock."""
        self._after_track(self.book.track(job))
        return job

    def _after_track(self, job: Job) -> None:
        """The core's own per-job memory after the book took ``job``: the round memory of
        jobs that left the queue, start times, and the GPUs running tasks prove exist."""
        self._forget_left()
        if job.state.active:
            if job.job_id not in self.started:
                self.started[job.job_id] = self.clock()
            for task in job.tasks:
                self.inventory.note_gpus(task.agent_id, task.gpu_ids, task.hostname)
        else:
            self.started.pop(job.job_id, None)

    def _forget_left(self) -> None:
        """Drop the reasons and reservations of jobs that left the queue (some left it by a
        kill that took only the book's lock). Under the core's lock."""
        for job_id in self.book.take_left():
            self.reasons.pop(job_id, None)
            self.reservations.forget(job_id)

    def save(self, job: Job, event: str | None = None) -> Job:
        """Store ``job`` through the book. A queued job the book no longer holds was killed
        after this caller (an offer round) read it: nothing is written, and the stored job
        comes back."""
        saved = self.book.save(job, event=event)
        if saved is None:
            return self.find(job.job_id) or job
        self._after_track(saved)
        return saved

    def save_all(self, jobs: list[Job]) -> list[Job]:
        """:meth:`save` for each of ``jobs`` (no event), in one store write."""
        saved = self.book.save_all(jobs)
        for job in saved:
            self._after_track(job)
        return saved

    def pin_queue(self) -> list[Job]:
        """Take the queue an offer round decides on (jobs submitted later wait for the next
        round); returns it in placement order. :meth:`unpin_queue` ends it."""
        self.pinned, order = self.book.pin()
        self._forget_left()
        return order

    def unpin_queue(self) -> None:
        self.pinned = None
        self.book.unpin()

    def visible_job(self, job_id: str, user: str, admin: bool = False) -> Job:
        """The job if the caller may see it.

        Raises:
            JobNotFound: missing, or owned by someone else (not revealed).
        """
        job = self.book.find(job_id) or self.store.get_job(job_id)
        if not admin and job.user != user:
            raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")
        return job

    def catch_up_offers(self) -> None:
        """Learn from the offers idle rounds kept unparsed (:class:`IdleOffers`), as those
        rounds would have: before anything reads what the agents offered."""
        if not self.idle_offers:
            return
        for at, offers in self.idle_offers.take():
            # declined already; marked as the round's own views are (core/offers.py)
            views, _ = self.offer_parser.parse(offers, False, self.accounts_shares)
            self.inventory.note_offers(views, at)

    def queued_jobs(self) -> list[Job]:
        """Queued jobs in placement order (from memory, as they are now)."""
        return self.book.ordered()

    def has_queued(self) -> bool:
        """Whether any job waits for offers."""
        return bool(self.book.queued)

    def accounts_shares(self, agent_id: str) -> bool:
        """Whether the agent's totals hold share blocks (its offer views are marked so)."""
        totals = self.inventory.get(agent_id)
        return totals is not None and totals.shareable

    def impossible_reason(self, spec: JobSpec) -> str | None:
        """Why no known agent could run ``spec`` (``None``: some could), kept per inventory
        version by the fields the answer reads, and by the spec itself: every round asks it
        of each of 10,000 queued jobs, whose specs do not change (issue 26)."""
        if self._impossible_version != self.inventory.version:
            self._impossible.clear()
            self._impossible_of_spec.clear()
            self._impossible_version = self.inventory.version
        hit = self._impossible_of_spec.get(id(spec))
        if hit is not None and hit[0] is spec:  # the spec is held: its id is not reused
            return hit[1]
        key = (spec.gpus, spec.nodes, spec.gpu_model, spec.cpus, spec.mem_mib, spec.disk_mib,
               spec.cuda_version, spec.gang_topology)  # fmt: skip
        if key not in self._impossible:
            error = self.inventory.impossible(spec)
            self._impossible[key] = None if error is None else str(error)
        if len(self._impossible_of_spec) >= _SPECS_KEPT:  # specs of jobs long gone
            self._impossible_of_spec.clear()
        self._impossible_of_spec[id(spec)] = (spec, self._impossible[key])
        return self._impossible[key]

    def free_gpus(self, views: list[OfferView]) -> dict[str, frozenset[int]]:
        """GPUs free per agent: offered now (``views``), else total minus DLC's tasks and
        drains."""
        free: dict[str, frozenset[int]] = {}
        busy: dict[str, set[int]] = {}
        for job in self.active.values():
            for task in job.tasks:
                busy.setdefault(task.agent_id, set()).update(task.gpu_ids)
        for agent in self.inventory.agents():
            used = busy.get(agent.agent_id, set()) | self.drains.held(agent.agent_id)
            free[agent.agent_id] = agent.gpu_ids - used
        for view in views:
            free[view.agent_id] = view.gpu_ids
        return free

    def per_inventory(self, name: str, compute: Callable[[list[AgentTotals]], _T]) -> _T:
        """``compute(agents)``, cached until :attr:`Inventory.version` changes."""
        version, value = self.inventory_facts.get(name, (-1, None))
        if version != self.inventory.version:
            value = compute(self.inventory.agents())
            self.inventory_facts[name] = (self.inventory.version, value)
        return cast(_T, value)  # what ``compute`` made for this name

    def find(self, job_id: str) -> Job | None:
        """The job from memory (queued or active) or the store; ``None`` when there is none."""
        job = self.book.find(job_id)
        if job is not None:
            return job
        try:
            return self.store.get_job(job_id)
        except JobNotFound:
            return None

    def set_framework_id(self, framework_id: str | None) -> None:
        """Persist the framework id before anything uses it (``None`` forgets it)."""
        with self.lock:
            self.store.framework_id = framework_id
            self.framework_id = framework_id
