"""The Mesos side of the core's engine port (:class:`~dlc.scheduler.core.ports.EngineCodec`).

The core decides in engine-neutral types: offers come to it as
:class:`~dlc.scheduler.placement.model.OfferView` values and launches leave it as
:class:`~dlc.scheduler.tasks.launch.TaskLaunch` values. :class:`MesosCodec` reads a v1 ``Offer``
into a view (:func:`dlc.mesos.offers.offer_view`), the master's ``/master/slaves`` entries into
agent totals (:func:`dlc.mesos.agents.decode_agents`), writes a launch as a v1 ``TaskInfo``
(:func:`dlc.mesos.task_info.build_task_info`), cuts the TaskInfos' resources from the offers as
offered (:func:`dlc.mesos.echo.echo_round`), keeps ``--reserve``'s dynamic reservations
(:class:`dlc.mesos.reserver.Reserver`), reads a v1 ``TaskStatus`` into a task update
(:func:`dlc.mesos.status.decode_status`) and writes the explicit reconciliation request
(:func:`dlc.mesos.status.reconcile_request`). A second engine is one more codec.

The service, the simulator and the benchmarks pass ``SchedulerCore(..., codec=MesosCodec())``;
importing this module also makes a ``MesosCodec`` the default of cores built without one
(:func:`~dlc.scheduler.core.ports.set_default_codec`), which is how the test suite's cores get it
(``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dlc.errors import DlcError
from dlc.mesos.agents import decode_agents
from dlc.mesos.echo import echo_round
from dlc.mesos.offers import offer_ids, offer_view
from dlc.mesos.reserver import Reserver
from dlc.mesos.status import decode_status, reconcile_request
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.core.ports import EchoedRound, ReservationKeeper, set_default_codec
from dlc.scheduler.placement.inventory import AgentTotals
from dlc.scheduler.placement.model import OfferView
from dlc.scheduler.tasks.launch import TaskLaunch
from dlc.scheduler.tasks.states import TaskUpdate


class MesosCodec:
    """Mesos offers, agents and task statuses in, Mesos TaskInfos and reconciliation out
    (stateless; pure)."""

    __slots__ = ()

    def offer_ids(self, offer: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """``(offer["id"]["value"], offer["agent_id"]["value"])``, ``None`` for a part the
        offer lacks (:func:`~dlc.mesos.offers.offer_ids`)."""
        return offer_ids(offer)

    def offer_inputs(self, offer: Mapping[str, Any]) -> tuple[Any, ...]:
        """What :func:`~dlc.mesos.offers.offer_view` reads of an offer besides its ids: its
        ``resources``, ``attributes``, ``hostname``, ``url`` and ``domain`` (the very objects;
        an agent whose fault domain alone changed is parsed again)."""
        get = offer.get
        return get("resources"), get("attributes"), get("hostname"), get("url"), get("domain")

    def decode_offer(self, offer: Mapping[str, Any]) -> OfferView:
        """A v1 ``Offer`` as a view (:func:`~dlc.mesos.offers.offer_view`; raises OfferError
        when it is malformed). The core asks only for offers that changed since the agent's
        last (:class:`~dlc.scheduler.core.offer_views.OfferParser`)."""
        return offer_view(offer)

    def decode_agents(
        self, agents: Iterable[Mapping[str, Any]], roles: tuple[str, ...] = ()
    ) -> list[AgentTotals]:
        """The master's ``/master/slaves`` ``slaves`` as agent totals, less what is reserved
        for roles not DLC's (:func:`~dlc.mesos.agents.decode_agents`; inactive and malformed
        entries left out)."""
        return decode_agents(agents, roles)

    def encode(self, task: TaskLaunch) -> dict[str, Any]:
        """The v1 ``TaskInfo`` JSON of ``task`` (:func:`~dlc.mesos.task_info.build_task_info`)."""
        return build_task_info(
            task.job, task.launch, task.framework_id, task.executor, task.kill_grace_s
        )

    def decode_status(self, status: Mapping[str, Any]) -> TaskUpdate:
        """A v1 ``TaskStatus`` as a task update (:func:`~dlc.mesos.status.decode_status`;
        raises AttributeError when its task or agent id is not an object; a malformed
        executor id makes it ``malformed``)."""
        return decode_status(status)

    def reconcile_request(self, tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        """The ``reconcileTasks`` list of ``(task id, agent id)`` pairs
        (:func:`~dlc.mesos.status.reconcile_request`)."""
        return reconcile_request(tasks)

    def echo_round(
        self,
        offers: Sequence[Mapping[str, Any]],
        jobs: Sequence[tuple[str, Sequence[dict[str, Any]]]],
        roles: Iterable[str] | None = None,
        reserver: ReservationKeeper | None = None,
        now: float = 0.0,
        role_of: Callable[[str], str | None] | None = None,
    ) -> EchoedRound:
        """The TaskInfos' resources cut from the offers as offered, with ``--reserve``'s
        RESERVE/UNRESERVE operations (:func:`~dlc.mesos.echo.echo_round`).

        Raises:
            DlcError: ``reserver`` is not one this codec made (:meth:`reserver`).
        """
        if reserver is not None and not isinstance(reserver, Reserver):
            raise DlcError(
                f"the Mesos codec reserves with its own Reserver, not {type(reserver).__name__}"
            )
        return echo_round(offers, jobs, roles, reserver, now, role_of)

    def reserver(self, idle_s: float, principal: str | None) -> Reserver:
        """A :class:`~dlc.mesos.reserver.Reserver` (``principal``: the framework's, which Mesos
        requires on its reservations when it has one)."""
        return Reserver(idle_s, principal)


# cores built without ``codec=`` speak Mesos once the Mesos adapter is loaded
set_default_codec(MesosCodec())
