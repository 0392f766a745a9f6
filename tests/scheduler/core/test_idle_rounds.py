"""A round with nothing queued declines offers by id and parses none of them, yet the
cluster picture still shows what the agents offered last (issue 26)."""

from __future__ import annotations

import pytest

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer


def _slave(agent: str) -> dict:
    return {"id": agent, "hostname": f"host-{agent}", "active": True,
            "resources": {"cpus": 64.0, "mem": 65536.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"}}  # fmt: skip


@pytest.fixture
def clock():
    now = [100.0]
    return now


@pytest.fixture
def core(tmp_path, clock) -> SchedulerCore:
    core = SchedulerCore(
        JobStore(tmp_path / "db"),
        CoreConfig(placement=PlacementConfig("first-fit")),
        clock=lambda: clock[0],
    )
    core.update_agents([_slave("a1"), _slave("a2")])
    return core


def test_an_idle_round_declines_every_offer_without_parsing_it(core, parses):
    actions = core.on_offers([offer("o1", "a1"), offer("o2", "a2")])
    assert actions.declines == ["o1", "o2"] and actions.suppress and not actions.accepts
    assert parses == []


def test_the_cluster_shows_the_latest_idle_offer_of_each_agent(core, clock, parses):
    core.on_offers([offer("o1", "a1", cpus=4), offer("o2", "a2", cpus=5)])
    clock[0] = 200.0
    core.on_offers([offer("o3", "a1", cpus=8)])  # a2 offers nothing this time
    assert parses == []
    agents = {a.agent_id: a for a in core.cluster()}
    assert (agents["a1"].free_cpus, agents["a1"].offered_at) == (8, 200.0)
    assert (agents["a2"].free_cpus, agents["a2"].offered_at) == (5, 100.0)
    assert sorted(parses) == ["o2", "o3"]  # parsed once, when read


def test_an_agent_the_master_did_not_list_is_learnt_from_at_once(core, parses):
    core.on_offers([offer("o1", "a9", gpus=list(range(16)))])
    assert parses == ["o1"]
    assert core.max_agent_gpus() == 16  # admission knows it before anything reads offers


def test_the_first_round_with_work_places_on_its_own_offers(core, parses):
    core.on_offers([offer("o1", "a1", gpus=[0, 1]), offer("o2", "a2", gpus=[])])
    core.submit("ann", JobSpec.from_dict({"image": "busybox", "gpus": 2, "cpus": 1}))
    actions = core.on_offers([offer("o3", "a1", gpus=[]), offer("o4", "a2", gpus=[0, 1])])
    assert [ids for ids, _ in actions.accepts] == [["o4"]]
    assert sorted(actions.declines) == ["o3"]


def test_kept_offers_are_read_as_they_last_were_and_unchanged_ones_are_not_parsed_again(
    core, clock, parses
):
    core.on_offers([offer("o1", "a1", cpus=4), offer("o2", "a2", cpus=4)])
    clock[0] = 200.0
    core.on_offers([offer("o3", "a1", cpus=8), offer("o4", "a2", cpus=4)])  # a1 changed
    agents = {a.agent_id: a for a in core.cluster()}
    assert (agents["a1"].free_cpus, agents["a1"].offered_at) == (8, 200.0)
    assert (agents["a2"].free_cpus, agents["a2"].offered_at) == (4, 200.0)
    assert sorted(parses) == ["o3", "o4"]  # each agent's latest, once
    clock[0] = 300.0
    core.on_offers([offer("o5", "a1", cpus=8), offer("o6", "a2", cpus=4)])  # both as before
    agents = {a.agent_id: a for a in core.cluster()}
    assert (agents["a1"].free_cpus, agents["a1"].offered_at) == (8, 300.0)
    assert (agents["a2"].free_cpus, agents["a2"].offered_at) == (4, 300.0)
    assert sorted(parses) == ["o3", "o4"]  # the views of o3 and o4 under the new ids
    clock[0] = 400.0
    core.on_offers([offer("o7", "a1", cpus=2)])  # a1 changed again; a2 offers nothing
    agents = {a.agent_id: a for a in core.cluster()}
    assert (agents["a1"].free_cpus, agents["a1"].offered_at) == (2, 400.0)
    assert (agents["a2"].free_cpus, agents["a2"].offered_at) == (4, 300.0)
    assert sorted(parses) == ["o3", "o4", "o7"]


def test_a_round_with_work_after_idle_rounds_compares_with_their_latest_offers(core, clock, parses):
    core.on_offers([offer("o1", "a1", gpus=[0, 1]), offer("o2", "a2", gpus=[])])
    clock[0] = 200.0
    core.on_offers([offer("o3", "a1", gpus=[]), offer("o4", "a2", gpus=[])])  # a1's GPUs taken
    core.submit("ann", JobSpec.from_dict({"image": "busybox", "gpus": 2, "cpus": 1}))
    clock[0] = 300.0
    actions = core.on_offers([offer("o5", "a1", gpus=[]), offer("o6", "a2", gpus=[0, 1])])
    assert [ids for ids, _ in actions.accepts] == [["o6"]] and actions.declines == ["o5"]
    # the kept o3 and o4 learnt first; o5 is o3 again (its view reused), o6 is new
    assert sorted(parses) == ["o3", "o4", "o6"]
    agents = {a.agent_id: a for a in core.cluster()}
    assert agents["a1"].offered_at == agents["a2"].offered_at == 300.0
