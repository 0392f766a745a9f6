"""A simulated Mesos master: agents' totals, what tasks use, and offers of the rest.

The arithmetic is Mesos's (:class:`dlc.mesos.resources.Resources`: scalars to three
decimals, SET ``gpu_ids``, RANGES ``gpu_mem``/``gpu_core`` and ``ports``), and a launch is
validated as the master validates it: the task's and its executor's resources must be
contained in what the agent has free, else the task is refused (``TASK_ERROR``). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlc.mesos.resources import Resources
from dlc.topology import gpu_shares


@dataclass(frozen=True)
class SimAgentSpec:
    """One simulated agent: its ``--resources`` text and attributes (name -> text)."""

    agent_id: str
    hostname: str
    resources: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class SimTask:
    """A task the simulated master runs: where, what it consumes, its GPU footprint."""

    task_id: str
    agent_id: str
    resources: Resources
    gpu_ids: tuple[int, ...]
    #: GPU index -> MiB of its memory held (shares) or the whole block (whole GPUs)
    gpu_mib: dict[int, int]


class SimMaster:
    """Agents, their free resources and the tasks on them.

    Args:
        agents: the agents, in the order offers are made.
    """

    def __init__(self, agents: list[SimAgentSpec]):
        self.specs = {a.agent_id: a for a in agents}
        self.total = {a.agent_id: Resources.parse(a.resources) for a in agents}
        self.free = dict(self.total)
        self.tasks: dict[str, SimTask] = {}
        self._offer_seq = 0
        #: offer id -> agent id of the latest round's offers (they expire with the round)
        self._offers: dict[str, str] = {}
        self.refused = 0

    def slaves(self) -> list[dict[str, Any]]:
        """The ``/master/slaves`` entries the core's inventory reads."""
        return [
            {
                "id": a.agent_id,
                "hostname": a.hostname,
                "active": True,
                "total_resources": self.total[a.agent_id].summary(),
                "attributes": dict(a.attributes),
            }
            for a in self.specs.values()
        ]

    def offers(self, only: set[str] | None = None) -> list[dict[str, Any]]:
        """One offer per agent with anything allocatable free (Mesos's default minimum).

        Args:
            only: agent ids to offer (``None``: every agent).
        """
        self._offers.clear()
        out = []
        for agent_id, spec in self.specs.items():
            if only is not None and agent_id not in only:
                continue
            free = self.free[agent_id]
            if free.scalar("cpus") < 0.01 and free.scalar("mem") < 32:
                continue
            self._offer_seq += 1
            offer_id = f"o{self._offer_seq}"
            self._offers[offer_id] = agent_id
            out.append(
                {
                    "id": {"value": offer_id},
                    "agent_id": {"value": agent_id},
                    "hostname": spec.hostname,
                    "resources": free.to_json(),
                    "attributes": [
                        {"name": k, "type": "TEXT", "text": {"value": v}}
                        for k, v in spec.attributes.items()
                    ],
                }
            )
        return out

    def launch(self, offer_ids: list[str], infos: list[dict]) -> list[tuple[SimTask | None, str]]:
        """ACCEPT: launch the tasks on the offers' agent, each checked against what is free.

        Returns:
            ``(task, "")`` per launched task, ``(None, why)`` per refused one.
        """
        agents = {self._offers.get(o) for o in offer_ids}
        out: list[tuple[SimTask | None, str]] = []
        for info in infos:
            agent_id = info.get("agent_id", {}).get("value", "")
            task_id = info["task_id"]["value"]
            if agents != {agent_id}:
                self.refused += 1
                out.append((None, f"offers {offer_ids} are not of agent {agent_id}"))
                continue
            need = Resources.from_json(info.get("resources", ()))
            executor = info.get("executor") or {}
            need = need + Resources.from_json(executor.get("resources", ()))
            if task_id in self.tasks or not self.free[agent_id].contains(need):
                self.refused += 1
                out.append((None, f"task {task_id} asks {need}, more than free"))
                continue
            self.free[agent_id] = self.free[agent_id] - need
            task = SimTask(task_id, agent_id, need, _gpu_ids(need), _gpu_mib(need))
            self.tasks[task_id] = task
            out.append((task, ""))
        return out

    def release(self, task_id: str) -> SimTask | None:
        """A task ended: its resources are free again."""
        task = self.tasks.pop(task_id, None)
        if task is not None:
            self.free[task.agent_id] = self.free[task.agent_id] + task.resources
        return task

    def check(self) -> list[str]:
        """Invariant breaches (empty when sound): nothing negative, nothing given twice,
        free + used == total on every agent."""
        problems = []
        used: dict[str, Resources] = {a: Resources() for a in self.total}
        spans: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        for task in self.tasks.values():
            used[task.agent_id] = used[task.agent_id] + task.resources
            for name in (gpu_shares.GPU_MEM, gpu_shares.GPU_CORE):
                for begin, end in ranges_of(task.resources, name):
                    spans.setdefault((task.agent_id, name), []).append((begin, end, task.task_id))
            for gpu in task.gpu_ids:
                spans.setdefault((task.agent_id, "gpu_ids"), []).append((gpu, gpu, task.task_id))
        for (agent_id, name), items in spans.items():
            items.sort()
            for (_, end, first), (begin, _, second) in zip(items, items[1:], strict=False):
                if begin <= end:
                    problems.append(f"{name} {begin} of {agent_id} given to {first} and {second}")
        for agent_id, total in self.total.items():
            if not total.contains(used[agent_id]):
                problems.append(f"agent {agent_id}: tasks use {used[agent_id]}, more than {total}")
            if used[agent_id] + self.free[agent_id] != total:
                problems.append(f"agent {agent_id}: free + used != total")
        return problems


def ranges_of(res: Resources, name: str) -> gpu_shares.Ranges:
    """The ``(begin, end)`` ranges of RANGES resource ``name`` in ``res`` (empty: none)."""
    for item in res.to_json():
        if item["name"] == name and item["type"] == "RANGES":
            return tuple((r["begin"], r["end"]) for r in item["ranges"]["range"])
    return ()


def _gpu_ids(res: Resources) -> tuple[int, ...]:
    return tuple(sorted(int(i) for i in res.set_items("gpu_ids")))


def _gpu_mib(res: Resources) -> dict[int, int]:
    return gpu_shares.amounts(ranges_of(res, gpu_shares.GPU_MEM))
