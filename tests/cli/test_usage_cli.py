"""`dlc jobs -o wide`, `dlc status` and `-o json` show what a job's GPUs did next to what it got."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.errors import ApiError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.usage import GpuUsage, encode_report
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer

TOTAL = 81559  # the real H100's MiB


@pytest.fixture
def served(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda spec: (spec.image, None))  # fmt: skip
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None)
    server.start()
    env = {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice", admin=True)}
    yield core, env, store
    server.stop()


def _running(core, util, top, user="alice"):
    job = core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    [(_, [info])] = core.on_offers([offer(f"o-{job.job_id}", "a1", gpus=[0])]).accepts
    task_id = info["task_id"]["value"]
    core.on_status({"task_id": {"value": task_id}, "state": "TASK_RUNNING",
                    "agent_id": {"value": "a1"}})  # fmt: skip
    gpu = int(info["resources"][-1]["set"]["item"][0])
    reading = GpuUsage(gpu, util, top, 1542, TOTAL, 1542, 6, 1000.0)
    core.on_usage("a1", encode_report({task_id: [reading]}))
    return job.job_id


def test_wide_listing_status_and_json_show_used_next_to_allocated(served):
    core, env, _ = served
    idle = _running(core, 0.0, 1)
    queued = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1})).job_id
    wide = CliRunner().invoke(cli, ["jobs", "-o", "wide"], env=env)
    assert wide.exit_code == 0, wide.output
    header, *lines = wide.output.splitlines()
    assert "USED" in header.split()
    row = {line.split()[0]: line for line in lines}
    assert "idle 0% 1.5/80 GiB" in row[idle]  # allocated, yet idle for the whole window
    status = CliRunner().invoke(cli, ["status", idle], env=env)
    assert "gpu use: idle 0% 1.5/80 GiB" in status.output
    shown = json.loads(CliRunner().invoke(cli, ["status", idle, "-o", "json"], env=env).output)
    assert shown["usage"]["mem_used_mib"] == 1542 and shown["usage"]["idle"] is True
    status = CliRunner().invoke(cli, ["status", queued], env=env)
    assert "gpu use: -" in status.output


def test_usage_lists_allocated_used_and_idle_gpus_per_user_and_job(served):
    core, env, store = served
    idle = _running(core, 0.0, 1)
    busy = _running(core, 90.0, 100, user="bob")
    table = CliRunner().invoke(cli, ["usage"], env=env)
    assert table.exit_code == 0, table.output
    header, *lines = table.output.splitlines()
    assert header.split() == ["USER", "GPUS", "SAMPLED", "IDLE", "UTIL", "MEM", "USED"]
    assert [line.split() for line in lines] == [
        ["alice", "1", "1", "1", "0%", "1.5", "GiB"],
        ["bob", "1", "1", "0", "90%", "1.5", "GiB"],
    ]
    jobs = json.loads(CliRunner().invoke(cli, ["usage", "--by", "job", "-o", "json"],
                                         env=env).output)  # fmt: skip
    assert {r["key"] for r in jobs["rows"]} == {idle, busy} and jobs["by"] == "job"
    # a user sees only their own jobs
    mine = {**env, "DLC_TOKEN": store.add_token("bob")}
    jobs = json.loads(CliRunner().invoke(cli, ["usage", "--by", "job", "-o", "json"],
                                         env=mine).output)  # fmt: skip
    assert [r["key"] for r in jobs["rows"]] == [busy]
    groups = json.loads(CliRunner().invoke(cli, ["usage", "--by", "group", "-o", "json"],
                                           env=env).output)  # fmt: skip
    assert groups["rows"][0]["gpus_allocated"] == 2 and groups["rows"][0]["gpus_idle"] == 1
    bad = CliRunner().invoke(cli, ["usage", "--by", "pool"], env=env)
    assert bad.exit_code == 2 and "'pool' is not one of" in bad.output
    with pytest.raises(ApiError, match="by") as raised:  # the API alone: one line, 400
        ApiClient(env["DLC_API"], env["DLC_TOKEN"]).usage("pool")
    assert "\n" not in str(raised.value)


def test_a_row_without_samples_shows_a_dash_not_zero_gib(served):
    core, env, _ = served
    job = core.submit("carol", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    [(_, [info])] = core.on_offers([offer("o-1", "a1", gpus=[0])]).accepts
    core.on_status({"task_id": info["task_id"], "state": "TASK_RUNNING",
                    "agent_id": {"value": "a1"}})  # fmt: skip
    table = CliRunner().invoke(cli, ["usage", "--by", "job"], env=env)
    (line,) = table.output.splitlines()[1:]
    assert line.split() == [job.job_id, "1", "0", "0", "-", "-"], table.output
