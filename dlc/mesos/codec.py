"""The Mesos side of the scheduling core's engine port (:class:`~dlc.scheduler.ports.EngineCodec`).

The core decides in engine-neutral types: offers come to it as
:class:`~dlc.scheduler.placement.OfferView` values and launches leave it as
:class:`~dlc.scheduler.task_launch.TaskLaunch` values. :class:`MesosCodec` reads a v1 ``Offer``
into a view (:func:`dlc.mesos.offers.offer_view`) and writes a launch as a v1 ``TaskInfo``
(:func:`dlc.mesos.task_info.build_task_info`). A second engine is one more codec.

The service, the simulator and the benchmarks pass ``SchedulerCore(..., codec=MesosCodec())``;
importing this module also makes a ``MesosCodec`` the default of cores built without one
(:func:`~dlc.scheduler.ports.set_default_codec`), which is how the test suite's cores get it
(``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlc.mesos.offers import offer_view
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.placement import OfferView
from dlc.scheduler.ports import set_default_codec
from dlc.scheduler.task_launch import TaskLaunch


class MesosCodec:
    """Mesos offers in, Mesos TaskInfos out (stateless; pure)."""

    __slots__ = ()

    def decode_offer(self, offer: Mapping[str, Any]) -> OfferView:
        """A v1 ``Offer`` as a view (:func:`~dlc.mesos.offers.offer_view`; raises OfferError
        when it is malformed). The core asks only for offers that changed since the agent's
        last (:class:`~dlc.scheduler.offer_views.OfferParser`)."""
        return offer_view(offer)

    def encode(self, task: TaskLaunch) -> dict[str, Any]:
        """The v1 ``TaskInfo`` JSON of ``task`` (:func:`~dlc.mesos.task_info.build_task_info`)."""
        return build_task_info(
            task.job, task.launch, task.framework_id, task.executor, task.kill_grace_s
        )


# cores built without ``codec=`` speak Mesos once the Mesos adapter is loaded
set_default_codec(MesosCodec())
