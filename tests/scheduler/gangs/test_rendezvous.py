"""Gangs that connect: ports taken from offers, host networking and the rendezvous variables."""

from __future__ import annotations

import json

from dlc.executor.container_spec import TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuContainerArgs
from dlc.mesos.offers import parse_port_ranges
from dlc.mesos.task_info import build_task_info, ports_resource
from dlc.scheduler.gangs.rendezvous import gang_env, take_port
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.placement.model import PlacementConfig
from tests.scheduler.helpers import job, offer, place

FF = PlacementConfig(policy="first-fit")


def _with_url(body: dict, ip: str) -> dict:
    body["url"] = {"scheme": "http", "address": {"hostname": body["hostname"], "ip": ip,
                                                  "port": 5051}, "path": "/slave(1)"}  # fmt: skip
    return body


def test_take_port_skips_taken_and_reports_exhaustion():
    ranges = ((31000, 31001), (31005, 31005))
    assert take_port(ranges, ()) == 31000
    assert take_port(ranges, {31000, 31001}) == 31005
    assert take_port(ranges, {31000, 31001, 31005}) is None
    assert take_port((), ()) is None


def test_parse_and_render_ports_resource_round_trip():
    resource = ports_resource([31002, 31000])
    assert resource["ranges"]["range"] == [
        {"begin": 31000, "end": 31000},
        {"begin": 31002, "end": 31002},
    ]
    assert parse_port_ranges([resource, {"name": "cpus", "type": "SCALAR"}]) == (
        (31000, 31000),
        (31002, 31002),
    )


def test_gang_env_for_torchrun_and_tensorflow():
    env = gang_env(1, 8, ["10.0.0.1:31000", "10.0.0.2:31004"])
    assert env["MASTER_ADDR"] == "10.0.0.1" and env["MASTER_PORT"] == "31000"
    assert (env["WORLD_SIZE"], env["NODE_RANK"], env["RANK"]) == ("2", "1", "1")
    assert env["NPROC_PER_NODE"] == "8"
    assert (env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"]) == ("2", "1", "8")
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("10.0.0.1", "31000")
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {"worker": ["10.0.0.1:31000", "10.0.0.2:31004"]},
        "task": {"type": "worker", "index": 1},
    }


def test_gang_takes_one_port_per_node_and_every_node_knows_node_0():
    offers = [_with_url(offer("o1", "a1"), "10.0.0.1"), _with_url(offer("o2", "a2"), "10.0.0.2")]
    result = place(offers, [job("g", gpus=2, nodes=2)], FF)
    by_rank = sorted(result.launches, key=lambda x: x.rank)
    assert [x.ports for x in by_rank] == [(31000,), (31000,)]
    assert by_rank[0].peers == by_rank[1].peers == ("10.0.0.1:31000", "10.0.0.2:31000")


def test_two_gangs_on_the_same_agents_get_different_ports():
    offers = [offer("o1", "a1"), offer("o2", "a2")]
    result = place(offers, [job("g1", gpus=2, nodes=2), job("g2", gpus=2, nodes=2)], FF)
    ports = {(x.agent_id, x.ports) for x in result.launches}
    assert ports == {("a1", (31000,)), ("a2", (31000,)), ("a1", (31001,)), ("a2", (31001,))}
    # without a url the hostname is the address
    assert {x.peers[0].rpartition(":")[0] for x in result.launches} <= {"host-a1", "host-a2"}


def test_gang_waits_with_a_reason_when_an_agent_offers_no_port():
    offers = [offer("o1", "a1"), offer("o2", "a2", ports=())]
    result = place(offers, [job("g", gpus=2, nodes=2)], FF)
    assert not result.launches
    assert "free port in its ports resource" in result.waiting["g"]


def test_single_node_jobs_take_no_port_and_keep_the_default_network():
    result = place([offer("o1", "a1")], [job("j", gpus=1)], FF)
    (launch,) = result.launches
    info = build_task_info(job("j", gpus=1), launch)
    assert launch.ports == () and not any(r["name"] == "ports" for r in info["resources"])
    spec = LaunchSpec.decode(info["data"])
    assert spec.network == "" and "MASTER_ADDR" not in spec.env


def test_gang_task_consumes_its_port_and_runs_on_the_host_network():
    gang = job("g", gpus=2, nodes=2)
    offers = [_with_url(offer("o1", "a1"), "10.0.0.1"), _with_url(offer("o2", "a2"), "10.0.0.2")]
    launch = next(x for x in place(offers, [gang], FF).launches if x.rank == 1)
    info = build_task_info(gang, launch)
    assert ports_resource([31000]) in info["resources"]
    spec = LaunchSpec.decode(info["data"])
    assert spec.network == "host" and spec.ports == (31000,)
    assert spec.env["MASTER_ADDR"] == "10.0.0.1" and spec.env["DLC_PORTS"] == "31000"
    assert spec.env["NODE_RANK"] == spec.env["DLC_NODE_RANK"] == "1"
    identity = TaskIdentity("fw", "ex", launch.task_id, "g")
    kwargs = create_kwargs(spec, identity, GpuContainerArgs(), network_mode="bridge")
    assert kwargs["network_mode"] == "host"
    single = LaunchSpec(job_id="j", image="busybox")
    assert create_kwargs(single, identity, GpuContainerArgs())["network_mode"] == "bridge"
