"""Racks and switches on openb-sized agents, and where each gang went.

The agents are the first 8-GPU G2 machines of the Alibaba openb node list (their CPUs and
memory as listed), ``AGENTS_PER_SWITCH`` to a switch and ``SWITCHES_PER_RACK`` switches to
a rack. :class:`RackEngine` notes, for every gang the core places, whether some switch had
room for the whole gang at the start of its offer round and how many switches and racks it
spans (bench/sim_racks.py, bench/sim_week.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dlc.scheduler.core.facade import Actions
from dlc.scheduler.gangs.topology import ATTR_RACK, ATTR_SWITCH
from dlc.scheduler.jobs.job import JobSpec, job_id_of_task
from dlc.sim import io
from dlc.sim.cluster_sim.engine import Engine
from dlc.sim.cluster_sim.master import SimAgentSpec
from dlc.sim.cluster_sim.openb import agent_of

AGENTS_PER_SWITCH = 4
SWITCHES_PER_RACK = 2
#: what the placement adds to every task for its executor (the benches' PlacementConfig)
EXECUTOR_CPUS, EXECUTOR_MEM = 0.1, 64.0


def racked_agents(
    count: int, advertise: bool
) -> tuple[list[SimAgentSpec], dict[str, tuple[str, str]]]:
    """``(agents, agent id -> (rack, switch))``: the first ``count`` 8-GPU G2 openb nodes;
    with ``advertise`` they carry ``dlc_rack``/``dlc_switch`` (gang topology on).

    Raises:
        SystemExit: the node list has fewer such nodes.
    """
    nodes = [n for n in io.load_nodes(io.trace_root()) if n.gpus == 8 and n.model == "G2"]
    if len(nodes) < count:
        raise SystemExit(f"--agents {count}: the openb list has only {len(nodes)} 8-GPU G2 nodes")
    agents, where = [], {}
    for k, node in enumerate(nodes[:count]):
        switch_no = k // AGENTS_PER_SWITCH
        rack, switch = f"r{switch_no // SWITCHES_PER_RACK}", f"s{switch_no}"
        agent = agent_of(node)  # plus the ports a gang's rendezvous takes one of
        agent = replace(agent, resources=agent.resources + ";ports:[31000-31099]")
        where[agent.agent_id] = (rack, switch)
        if advertise:
            agent = replace(agent, attributes={**agent.attributes, ATTR_RACK: rack,
                                               ATTR_SWITCH: switch})  # fmt: skip
        agents.append(agent)
    return agents, where


@dataclass
class GangNote:
    """One gang placement: did a switch have room at the round's start, where it went."""

    nodes: int
    fits_switch: bool
    switches: int
    racks: int


class RackEngine(Engine):
    """The simulation engine, noting for every gang placed where it went and what fit."""

    def __init__(self, agents, config, where: dict[str, tuple[str, str]], **kw):
        super().__init__(agents, config, **kw)
        self.where = where
        self.notes: list[GangNote] = []

    def observe_round(self, actions: Actions) -> None:
        by_job: dict[str, list[str]] = {}
        for _, infos in actions.accepts:
            for info in infos:
                parsed = job_id_of_task(info["task_id"]["value"])
                if parsed is None:  # not a task id DLC made
                    continue
                by_job.setdefault(parsed[0], []).append(info["agent_id"]["value"])
        for job_id, agents in by_job.items():
            record = self._by_job.get(job_id)
            if record is not None and record.item.spec.nodes >= 2:
                self.notes.append(self._note(record.item.spec, agents))

    def _note(self, spec: JobSpec, agents: list[str]) -> GangNote:
        room: dict[str, int] = {}
        for agent_id, res in self.master.free.items():
            if (res.scalar("gpus") >= spec.gpus and res.scalar("cpus") >= spec.cpus + EXECUTOR_CPUS
                    and res.scalar("mem") >= spec.mem_mib + EXECUTOR_MEM):  # fmt: skip
                switch = self.where[agent_id][1]
                room[switch] = room.get(switch, 0) + 1
        fits = any(n >= spec.nodes for n in room.values())
        return GangNote(spec.nodes, fits, len({self.where[a][1] for a in agents}),
                        len({self.where[a][0] for a in agents}))  # fmt: skip


def in_one_switch(notes: list[GangNote]) -> tuple[int, int]:
    """``(gangs that fit one switch, of those placed in one)``."""
    fitting = [n for n in notes if n.fits_switch]
    return len(fitting), sum(1 for n in fitting if n.switches == 1)
