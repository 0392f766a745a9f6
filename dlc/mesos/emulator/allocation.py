"""The emulated master's allocator: which framework gets which agent's free resources.

Like Mesos's hierarchical allocator it offers what an agent has free to one framework and role
at a time (resources reserved for a role only to that role's frameworks), skips suppressed
roles, honours DECLINE/ACCEPT filters (an offer is refused while it is no larger than a filter's
resources), keeps agents with ``gpus`` away from frameworks without the ``GPU_RESOURCES``
capability, and offers nothing below Mesos's default minimum (``cpus:0.01`` or ``mem:32``).
Frameworks are served in order of the share they already hold.
"""

from __future__ import annotations

from typing import Any

from dlc.mesos.emulator.model import Agent, Framework
from dlc.mesos.resources import Resources, offerable_to


def allocatable(resources: Resources) -> bool:
    """Mesos's default ``--min_allocatable_resources=cpus:0.01|mem:32``."""
    return resources.scalar("cpus") >= 0.01 or resources.scalar("mem") >= 32


class Allocator:
    """Periodic and on-demand allocation for a :class:`~dlc.mesos.emulator.master.Master`."""

    def __init__(self, master: Any, interval: float) -> None:
        self.master = master
        self.interval = interval
        self._requested = True
        self._last = float("-inf")

    def request(self) -> None:
        """Asks for an allocation run on the next tick."""
        self._requested = True

    def tick(self, now: float) -> None:
        """Allocates when requested or when the allocation interval elapsed."""
        if self._requested or now - self._last >= self.interval:
            self._requested = False
            self._last = now
            self.allocate(now)

    def _share(self, framework: Framework) -> float:
        cpus = 0.0
        for task in self.master.tasks.values():
            if task.framework_id == framework.framework_id and not task.terminal:
                cpus += task.resources.scalar("cpus")
        for offer in self.master.offers.values():
            if offer.framework_id == framework.framework_id:
                cpus += offer.resources.scalar("cpus")
        return cpus

    def _eligible(self, framework: Framework, agent: Agent, free: Resources, now: float) -> bool:
        if not framework.connected:
            return False
        if agent.total.scalar("gpus") > 0 and not framework.has_capability("GPU_RESOURCES"):
            return False
        filters = [f for f in framework.filters.get(agent.agent_id, []) if f.expires > now]
        framework.filters[agent.agent_id] = filters
        return not any(f.resources.contains(free) for f in filters)

    def allocate(self, now: float) -> None:
        """Offers each agent's free resources, one offer per framework and role.

        As in Mesos, resources reserved for a role (or an ancestor of it) go only to that
        role's frameworks, unreserved ones to the first eligible framework and role.
        """
        master = self.master
        batches: dict[str, list[dict[str, Any]]] = {}
        for agent in master.agents.values():
            free = agent.total - master.used(agent.agent_id) - master.offered(agent.agent_id)
            if not allocatable(free):
                continue
            frameworks = sorted(
                master.frameworks.values(), key=lambda f: (self._share(f), f.registered_time)
            )
            for framework in frameworks:
                for role in framework.roles:
                    if not framework.wants(role):
                        continue
                    part = free.select(lambda _name, key, r=role: offerable_to(key, r))
                    if not allocatable(part) or not self._eligible(framework, agent, part, now):
                        continue
                    offer = master.new_offer(framework, agent, part, role)
                    batches.setdefault(framework.framework_id, []).append(master.offer_json(offer))
                    free = free - part
        for framework_id, offers in batches.items():
            master.send_to(framework_id, {"type": "OFFERS", "offers": {"offers": offers}})
