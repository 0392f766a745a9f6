"""Properties of placement over random offers and queues (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dlc.scheduler.placement.model import OfferView, PlacementConfig
from tests.scheduler.helpers import place

from ..helpers import job

CONFIG = PlacementConfig("first-fit")

agents = st.lists(
    st.tuples(
        st.sets(st.integers(0, 7), max_size=8),  # free gpu ids
        st.floats(0, 16, allow_nan=False),  # cpus
        st.integers(0, 8192),  # mem
    ),
    min_size=1,
    max_size=6,
)
jobs = st.lists(
    st.tuples(st.integers(1, 8), st.integers(1, 3), st.floats(0.1, 4), st.integers(32, 4096)),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(agents, jobs)
def test_placement_never_oversubscribes_and_gangs_are_whole(agent_list, job_list):
    offers = [
        OfferView(f"o{i}", f"a{i}", f"h{i}", cpus, mem, 0, len(ids), frozenset(ids))
        for i, (ids, cpus, mem) in enumerate(agent_list)
    ]
    queue = [
        job(f"j{n}", gpus=g, nodes=nodes, cpus=cpus, mem_mib=mem, at=n)
        for n, (g, nodes, cpus, mem) in enumerate(job_list)
    ]
    result = place(offers, queue, CONFIG)
    by_offer = {o.agent_id: o for o in offers}
    specs = {j.job_id: j.spec for j in queue}
    used_gpus: dict[str, set[int]] = {}
    used_cpus: dict[str, float] = {}
    used_mem: dict[str, float] = {}
    for launch in result.launches:
        spec = specs[launch.job_id]
        assert len(launch.gpu_ids) == spec.gpus
        taken = used_gpus.setdefault(launch.agent_id, set())
        assert not taken & set(launch.gpu_ids), "a GPU was given twice"
        taken |= set(launch.gpu_ids)
        assert set(launch.gpu_ids) <= by_offer[launch.agent_id].gpu_ids
        used_cpus[launch.agent_id] = used_cpus.get(launch.agent_id, 0) + spec.cpus + 0.1
        used_mem[launch.agent_id] = used_mem.get(launch.agent_id, 0) + spec.mem_mib + 64
    for agent_id, cpus in used_cpus.items():
        assert cpus <= by_offer[agent_id].cpus + 1e-6
        assert used_mem[agent_id] <= by_offer[agent_id].mem_mib + 1e-6
    for job_id in result.placed_jobs:
        agents_of_job = [x.agent_id for x in result.launches if x.job_id == job_id]
        assert len(agents_of_job) == specs[job_id].nodes  # whole gang
        assert len(set(agents_of_job)) == len(agents_of_job)  # on distinct agents
    placed = set(result.placed_jobs)
    assert placed.isdisjoint(result.waiting)
    assert placed | set(result.waiting) == set(specs)
    declined = set(result.declined)
    assert declined == {o.offer_id for o in offers if o.agent_id not in used_gpus}
