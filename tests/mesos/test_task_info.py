"""TaskInfo built for a placement: the exact JSON body (pymesos style)."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

from dlc.mesos.task_info import build_task_info
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.placement.model import Launch
from dlc.scheduler.tasks.launch import ExecutorConfig


def _job(**spec) -> Job:
    body = {
        "framework": "pytorch:2.3",
        "image": "pytorch/pytorch:2.3.1",
        "gpus": 2,
        "cpus": 4,
        "mem_mib": 8192,
        "command": ["python", "train.py"],
        "env": {"EPOCHS": "3"},
        **spec,
    }
    return Job("j1", "alice", JobSpec.from_dict(body), attempt=1)


LAUNCH = Launch(
    job_id="j1",
    task_id="j1.1.0",
    rank=0,
    agent_id="agent-7",
    hostname="gpu7",
    offer_ids=("offer-1",),
    gpu_ids=(0, 2),
)


def test_task_info_exact_body():
    info = build_task_info(_job(), LAUNCH, "fw-1", ExecutorConfig(python="/opt/py/bin/python"))
    data = info.pop("data")
    assert info == {
        "name": "dlc j1 pytorch:2.3 gpus 0,2",
        "task_id": {"value": "j1.1.0"},
        "agent_id": {"value": "agent-7"},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 4.0}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 8192.0}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 2.0}},
            {"name": "gpu_ids", "type": "SET", "set": {"item": ["0", "2"]}},
        ],
        "executor": {
            "type": "CUSTOM",
            "executor_id": {"value": "dlc-executor.j1.1.0"},
            "name": "dlc-executor",
            "source": "dlc",
            "command": {"value": "/opt/py/bin/python -m dlc executor"},
            "resources": [
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                {"name": "mem", "type": "SCALAR", "scalar": {"value": 64.0}},
            ],
            "framework_id": {"value": "fw-1"},
        },
        "labels": {
            "labels": [
                {"key": "dlc.job_id", "value": "j1"},
                {"key": "dlc.user", "value": "alice"},
                {"key": "dlc.ml_framework", "value": "pytorch:2.3"},
                {"key": "dlc.image", "value": "pytorch/pytorch:2.3.1"},
                {"key": "dlc.gpu_ids", "value": "0,2"},
                {"key": "dlc.attempt", "value": "1"},
                {"key": "dlc.rank", "value": "0"},
                {"key": "dlc.nodes", "value": "1"},
            ]
        },
    }
    json.loads(base64.b64decode(data))  # base64 of JSON, as the v1 mapping carries bytes
    spec = LaunchSpec.decode(data)
    assert spec.gpu_ids == (0, 2)
    assert spec.command == ("python", "train.py")
    assert spec.image == "pytorch/pytorch:2.3.1"
    assert spec.env == {"EPOCHS": "3", "DLC_GPU_IDS": "0,2"}
    assert (spec.cpus, spec.mem_mib, spec.user) == (4.0, 8192, "alice")


def test_python_path_with_spaces_is_quoted():
    info = build_task_info(_job(), LAUNCH, None, ExecutorConfig(python="/my env/python"))
    assert info["executor"]["command"]["value"] == "'/my env/python' -m dlc executor"
    assert "framework_id" not in info["executor"]


def test_multi_node_task_name_and_rank_env():
    launch = Launch(
        job_id="j1",
        task_id="j1.1.1",
        rank=1,
        agent_id="agent-8",
        hostname="gpu8",
        offer_ids=("offer-2",),
        gpu_ids=(4, 5),
    )
    info = build_task_info(_job(nodes=2, disk_mib=100), launch)
    assert info["name"] == "dlc j1 pytorch:2.3 gpus 4,5 node 2/2"
    assert {"name": "disk", "type": "SCALAR", "scalar": {"value": 100.0}} in info["resources"]
    env = LaunchSpec.decode(info["data"]).env
    assert env["DLC_NODE_RANK"] == "1" and env["DLC_NUM_NODES"] == "2"


def test_a_cpu_only_task_asks_no_gpu_resource_and_says_so():
    """``gpus: 0``: no ``gpus``/``gpu_ids`` resource (the agent may have none), a name and
    labels without GPU ids, and a launch the executor runs with every GPU hidden."""
    launch = replace(LAUNCH, gpu_ids=(), task_id="j1.1.0")
    info = build_task_info(_job(gpus=0), launch, "fw-1")
    assert [r["name"] for r in info["resources"]] == ["cpus", "mem"]
    assert info["name"] == "dlc j1 pytorch:2.3 cpu only"
    labels = {x["key"]: x["value"] for x in info["labels"]["labels"]}
    assert labels["dlc.gpu_ids"] == ""
    spec = LaunchSpec.decode(info["data"])
    assert (spec.gpu_ids, spec.share, spec.env["DLC_GPU_IDS"]) == ((), None, "")


def test_a_cpu_only_gang_starts_one_process_per_node():
    """torchrun refuses ``--nproc-per-node 0``: a CPU-only node runs one process."""
    peers = ("10.0.0.1:31000", "10.0.0.2:31000")
    launch = replace(LAUNCH, gpu_ids=(), ports=(31000,), peers=peers)
    env = LaunchSpec.decode(build_task_info(_job(gpus=0, nodes=2), launch)["data"]).env
    assert env["NPROC_PER_NODE"] == env["PET_NPROC_PER_NODE"] == "1"
    elastic = LaunchSpec.decode(build_task_info(_job(gpus=0, nodes="1:3"), launch)["data"]).env
    assert elastic["PET_NPROC_PER_NODE"] == "1" and elastic["PET_NNODES"] == "1:3"


def test_kill_policy_carries_the_grace_only_when_given():
    assert "kill_policy" not in build_task_info(_job(), LAUNCH, "fw-1")
    info = build_task_info(_job(), LAUNCH, "fw-1", kill_grace_s=30.0)
    assert info["kill_policy"] == {"grace_period": {"nanoseconds": 30_000_000_000}}


def test_spec_json_is_asdict_json_with_every_field_set():
    """The spec's JSON is made without ``asdict`` (issue 26): it must stay the text that
    ``asdict`` gives, nested dataclasses and tuples included, and read back equal."""
    import dataclasses

    from dlc.scheduler.jobs.launch_spec import GpuShare, TaskPolicy, Volume

    spec = LaunchSpec(
        job_id="j1", image="img", framework="pytorch:2.3", command=("python", "t.py"),
        env={"B": "2", "A": "1"}, gpu_ids=(3, 1), gpu_uuids=("GPU-a", "GPU-b"), cpus=2.5,
        mem_mib=4096, workdir="/w", volumes=(Volume("/data", "/d"), Volume("/x", "/y", False)),
        user="ann", cuda_version="12.1", gpu_minors=(3, 1), driver_version="550",
        policy=TaskPolicy(("/data",), "1000:1000", False, ("reg.io",), True),
        share=GpuShare(2, "GPU-c", 1024, 250, "watchdog", 2), network="host", ports=(31000,),
        workdir_url="http://h/w", job_secret="s", publish=((8888, 31001),), idle_timeout_s=60.0,
    )  # fmt: skip
    body = dataclasses.asdict(spec)
    body["version"] = 1
    assert spec.to_json() == json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert LaunchSpec.from_json(spec.to_json()) == spec
    plain = LaunchSpec(job_id="j2", image="busybox")
    body = dataclasses.asdict(plain)
    body["version"] = 1
    assert plain.to_json() == json.dumps(body, sort_keys=True, separators=(",", ":"))
