"""What the scheduling core needs from the layers above it, as protocols (ports).

The core decides; adapters persist and observe. :class:`JobStore` is implemented by
:class:`dlc.store.sqlite.JobStore` (and the in-memory store of tests and the simulator),
:class:`RoundSink` by :class:`dlc.api.metrics.SchedulerMetrics`. The core imports only these
protocols, so it never imports SQLite or Prometheus (the layer contracts in ``.importlinter``).

The other way up, :class:`JobReader` is what the API, the metrics and the dashboard read
jobs and history through: :class:`~dlc.scheduler.core.facade.SchedulerCore` satisfies it, and they
never reach the store behind it (``core.store``; ``tests/api/test_no_core_store.py``).
:class:`TenancyAdmin` and :class:`TokenIssuer` are the audited settings and the tokens the
core writes for the API, :class:`UserDirectory` the user names it checks a limit's user
against (the stores satisfy them).

:class:`EngineCodec` is the engine's side: the core reads offers as
:class:`~dlc.scheduler.placement.model.OfferView` values and decides engine-neutral
:class:`~dlc.scheduler.tasks.launch.TaskLaunch` values; the codec it holds makes the views from
the engine's offers and the engine's messages from the launches, cuts those messages'
resources from the offers as offered (:class:`EchoedRound`) and keeps ``--reserve``'s
reservations (:class:`ReservationKeeper`) (:class:`dlc.mesos.codec.MesosCodec`: v1 ``Offer``
in, v1 ``TaskInfo`` out). The engine's agent list comes in through it too, as
:class:`~dlc.scheduler.placement.inventory.AgentTotals` records (Mesos: ``/master/slaves`` entries),
and its task status updates, as :class:`~dlc.scheduler.tasks.states.TaskUpdate` values (Mesos: v1
``TaskStatus``); the reconciliation request the core asks for is the codec's too, so the core
parses and builds no Mesos JSON of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlc.errors import DlcError
from dlc.scheduler.jobs.job import Job, JobState
from dlc.scheduler.placement.inventory import AgentTotals
from dlc.scheduler.placement.model import Launch, OfferView
from dlc.scheduler.tasks.launch import TaskLaunch
from dlc.scheduler.tasks.states import TaskUpdate
from dlc.scheduler.tenancy.policy import AuditEntry, Policy, Resources, UserLimits


class JobStore(Protocol):
    """Where jobs live between scheduler runs."""

    framework_id: str | None

    def new_job_id(self) -> str:
        """A fresh, unused job id."""

    def add_job(self, job: Job) -> Job:
        """Stores a new job; returns it as stored."""

    def save_job(self, job: Job, event: str | None = None) -> Job:
        """Stores a changed job (and an event line); returns it as stored."""

    def get_job(self, job_id: str) -> Job:
        """One job; raises JobNotFound."""

    def list_jobs(
        self,
        user: str | None = None,
        states: set[JobState] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs of ``user`` in ``states``, oldest first unless ``newest_first``."""

    def list_jobs_page(self, user: str | None, limit: int, before: str | None = None) -> list[Job]:
        """Up to ``limit`` jobs of ``user``, newest first, older than job ``before``."""

    def history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid API token, else ``None``."""

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid API token, else ``None``."""


class RoundSink(Protocol):
    """Observes each offer round (monitoring)."""

    def record_round(
        self,
        views: Sequence[OfferView],
        received: int,
        declined: int,
        latency_s: float,
        placed: Sequence[tuple[Job, Sequence[Launch]]],
    ) -> None:
        """Counts one offer batch and what was placed on it."""


class ReservationKeeper(Protocol):
    """What ``--reserve`` keeps between rounds (made by :meth:`EngineCodec.reserver`, handed
    back to :meth:`EngineCodec.echo_round` each round); the core asks it one thing."""

    def holding(self) -> bool:
        """Whether some GPU is still reserved (offers must keep coming to release it)."""


@dataclass
class EchoedRound:
    """One round's launches with their resources as offered (:meth:`EngineCodec.echo_round`).

    Attributes:
        accepts: ``(offer_ids, messages)`` per agent and allocation role (Mesos takes one
            ACCEPT only of offers allocated to one role).
        unused: offer ids no accept uses (to decline).
        refused: job id -> why its tasks could not be cut from the offers (it stays queued).
        operations: offer ids -> the engine's operations to run in that accept before its
            launches (Mesos: ``RESERVE``/``UNRESERVE`` with ``--reserve``); offers with no
            launch get an accept of these alone.
    """

    accepts: list[tuple[list[str], list[dict[str, Any]]]] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    operations: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=dict)


class EngineCodec(Protocol):
    """The engine's side of the core: its offers, agents and task updates in, its launch and
    reconciliation messages out.

    The core decides in engine-neutral types (:class:`~dlc.scheduler.placement.model.OfferView`,
    :class:`~dlc.scheduler.placement.inventory.AgentTotals`,
    :class:`~dlc.scheduler.tasks.launch.TaskLaunch`,
    :class:`~dlc.scheduler.tasks.states.TaskUpdate`); a codec translates at both edges, so the
    core builds no engine JSON of its own. Its methods are pure and cheap (the reservation
    keeper aside, which is the caller's state): they run under the core's lock, off the job
    book's: once per offer (:meth:`offer_ids`; :meth:`offer_inputs` in a round with work),
    once per changed offer (:meth:`decode_offer`), once per launched task (:meth:`encode`),
    once per round with work (:meth:`echo_round`, mostly in
    :meth:`~dlc.scheduler.core.offers.OfferRound.prepare_launch`), once per agent list the
    engine adapter hands the core (:meth:`decode_agents`), once per reconciliation
    (:meth:`reconcile_request`) and once per status update (:meth:`decode_status`, before the
    core takes its lock: hot, hundreds a second in a busy cluster). The Mesos one is
    :class:`dlc.mesos.codec.MesosCodec`.
    """

    def offer_ids(self, offer: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """``(offer id, agent id)`` of one engine offer, ``None`` for one it lacks (a
        malformed offer: declined by its id where it has one). The fast path of a round
        with nothing queued (:class:`~dlc.scheduler.core.offer_views.IdleOffers`): no parse."""

    def offer_inputs(self, offer: Mapping[str, Any]) -> tuple[Any, ...]:
        """The parts of an offer its view is made of, ids aside: an agent's offer whose
        parts equal its last one's has the same view under the new offer id
        (:class:`~dlc.scheduler.core.offer_views.OfferParser`). The very objects, not copies."""

    def decode_offer(self, offer: Mapping[str, Any]) -> OfferView:
        """The view of one engine offer; raises OfferError when it is malformed."""

    def decode_agents(
        self, agents: Iterable[Mapping[str, Any]], roles: tuple[str, ...]
    ) -> list[AgentTotals]:
        """The engine's agents (Mesos: ``/master/slaves`` ``slaves``) as exact totals, in
        order; inactive and malformed ones are left out (a job only they could run is
        impossible now), and so are resources reserved for roles that are neither one of
        ``roles`` (the framework's; empty: the default role) nor a parent of one."""

    def encode(self, task: TaskLaunch) -> dict[str, Any]:
        """The engine's message starting ``task`` (for Mesos: the v1 ``TaskInfo`` JSON)."""

    def decode_status(self, status: Mapping[str, Any]) -> TaskUpdate:
        """One engine task status update (Mesos: a v1 ``TaskStatus``) as the core reads it.
        Parts the update lacks take :class:`~dlc.scheduler.tasks.states.TaskUpdate`'s "none"
        values; an update too malformed to read (Mesos: a task or agent id that is not an
        object) raises (the engine adapter logs it and does not acknowledge it); one whose
        origin cannot be checked (Mesos: a malformed executor id) comes back ``malformed``
        (the core refuses it and asks for the task's state again)."""

    def reconcile_request(self, tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        """The engine's explicit reconciliation request for ``tasks`` (``(task id, agent
        id)`` each, in order; Mesos: ``[{"task_id": {"value": ...}, "agent_id": {"value":
        ...}}]``), which the core returns to the engine adapter as it is."""

    def echo_round(
        self,
        offers: Sequence[Mapping[str, Any]],
        jobs: Sequence[tuple[str, Sequence[dict[str, Any]]]],
        roles: Iterable[str] | None,
        reserver: ReservationKeeper | None,
        now: float,
        role_of: Callable[[str], str | None] | None,
    ) -> EchoedRound:
        """The round's accepts: each message of :meth:`encode` (``jobs``: ``(job id,
        messages)`` in launch order, rewritten in place) with its resources cut from the
        offers as offered (roles, reservations), all or nothing per job.

        Args:
            offers: the round's engine offers.
            jobs: the placed jobs' messages, in launch order.
            roles: the framework's roles (``None``: whatever the engine offered).
            reserver: ``--reserve``'s keeper (:meth:`reserver`), or ``None``.
            now: the time (the reserver's idle clock).
            role_of: job id -> the only role whose offers it may use, or ``None``.
        """

    def reserver(self, idle_s: float, principal: str | None) -> ReservationKeeper:
        """A keeper of dynamic reservations for ``--reserve``: GPUs a task takes are
        reserved for the offer's role, and given back after ``idle_s`` unused."""


#: the codec of cores built without one (:func:`set_default_codec`)
_default_codec: EngineCodec | None = None


def set_default_codec(codec: EngineCodec | None) -> EngineCodec | None:
    """Make ``codec`` the one cores built without ``codec=`` use; returns the previous one.
    An engine adapter calls it when imported (:mod:`dlc.mesos.codec`)."""
    global _default_codec
    previous, _default_codec = _default_codec, codec
    return previous


def default_codec() -> EngineCodec:
    """The registered default codec.

    Raises:
        DlcError: no engine adapter registered one (and the core was given none).
    """
    if _default_codec is None:
        raise DlcError(
            "the scheduler core has no engine codec: pass SchedulerCore(codec=...) "
            "(dlc.mesos.codec.MesosCodec for Mesos) or import dlc.mesos.codec"
        )
    return _default_codec


class JobReader(Protocol):
    """Jobs and their history as the API, the metrics and the dashboard read them
    (:class:`~dlc.scheduler.core.facade.SchedulerCore` satisfies it)."""

    def get_job(self, job_id: str) -> Job:
        """One job, whoever owns it (the caller authorizes); raises JobNotFound."""

    def all_jobs(self) -> list[Job]:
        """Every stored job, oldest first."""

    def job_history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""


class TenancyAdmin(Protocol):
    """The audited tenancy settings (groups, quotas, limits, grace) of a store."""

    def tenancy_policy(self) -> Policy:
        """The whole policy as the core reads it."""

    def create_group(
        self, name: str, actor: str, default_pool: str = ..., preempt_within: bool = ...
    ) -> None:
        """Create (or update the settings of) a group."""

    def add_member(self, group: str, user: str, actor: str) -> None:
        """Put ``user`` in ``group`` (a user is in one group: this moves them)."""

    def remove_member(self, group: str, user: str, actor: str) -> None:
        """Take ``user`` out of ``group``."""

    def set_quota(
        self, group: str, pool: str, guaranteed: Resources, actor: str,
        ceiling: Resources | None = None,
    ) -> None:  # fmt: skip
        """Set a group's guarantee (and optional ceiling) in a pool."""

    def set_user_limits(self, limits: UserLimits, actor: str) -> None:
        """Set a user's caps."""

    def update_user_limits(
        self, user: str, changes: Mapping[str, float | None], actor: str
    ) -> None:
        """Change only the named caps (``None``: removed), keep the others."""

    def clear_user_limits(self, user: str, actor: str) -> bool:
        """Remove all of a user's caps; ``False``: they had none."""

    def set_grace(self, seconds: float, actor: str) -> None:
        """The grace period preempted jobs get."""

    def quota_audit(self, limit: int = 100) -> list[AuditEntry]:
        """The latest audited changes, newest first."""


class UserDirectory(Protocol):
    """The user names a store has seen: of tokens, group members and jobs (DLC keeps no
    user list of its own; a user is whoever holds a token)."""

    def knows_user(self, user: str) -> bool:
        """Whether any token (revoked or expired too), group member or job is ``user``'s."""

    def user_names(self) -> list[str]:
        """Every token's user and group member, sorted (names to suggest for a typo)."""


class TokenIssuer(Protocol):
    """Makes API tokens (a store; only hashes are kept)."""

    def add_token(
        self,
        user: str,
        admin: bool = False,
        token: str | None = None,
        max_priority: int | None = None,
        expires_at: float | None = None,
    ) -> str:
        """Create a bearer token for ``user``; returns it (shown once)."""
