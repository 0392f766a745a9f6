"""`dlc submit/jobs/status/kill/logs` with CliRunner against a running API on loopback."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.cli.submit_cmd import load_spec_file, parse_mem
from dlc.errors import ImageNotFound, JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.sandboxes import FRAMEWORK_ID, agent_sandbox
from tests.scheduler.helpers import offer


def _resolver(spec):
    if spec.image:
        return spec.image, None
    known = {"pytorch:2.3": "pytorch/pytorch:2.3.1-cuda12.1"}
    if spec.framework not in known:
        raise ImageNotFound(f"unknown framework {spec.framework}; known: {', '.join(known)}")
    return known[spec.framework], "12.1"


@pytest.fixture
def env(tmp_path):
    store = JobStore(tmp_path / "db")
    config = CoreConfig(
        placement=PlacementConfig("first-fit"), allowed_volumes=("/data",), default_max_priority=10
    )
    core = SchedulerCore(store, config, _resolver)
    logs = LogReader(lambda: FRAMEWORK_ID, sandbox_roots=[tmp_path / "agents"])
    server = ApiServer(core, logs, lambda actions: None)
    server.start()
    token = store.add_token("alice", max_priority=10)
    yield {"DLC_API": server.url, "DLC_TOKEN": token}, core, tmp_path
    server.stop()


def run(env, *args):
    return CliRunner().invoke(cli, list(args), env=env)


def test_submit_with_flags_prints_job_id(env):
    e, core, _ = env
    result = run(e, "submit", "--framework", "pytorch:2.3", "--gpus", "2", "--mem", "16G",
                 "-e", "A=1", "-v", "/data/x:/x", "--priority", "3", "--", "python", "t.py", "--lr",
                 "0.1")  # fmt: skip
    assert result.exit_code == 0, result.output
    job = core.store.get_job(result.output.split()[0])
    spec = job.spec
    assert (spec.gpus, spec.mem_mib, spec.priority) == (2, 16384, 3)
    assert spec.command == ("python", "t.py", "--lr", "0.1")
    assert spec.env == {"A": "1"} and spec.volumes[0].host_path == "/data/x"
    assert spec.image == "pytorch/pytorch:2.3.1-cuda12.1"


def test_priority_above_the_token_grant_is_refused_in_one_line(env):
    e, core, _ = env
    result = run(e, "submit", "--image", "busybox", "--priority", "11", "--", "true")
    assert result.exit_code != 0
    assert result.output.strip() == (
        "Error: priority: 11 is above your limit 10; use --priority 10 or lower, or ask an admin"
    )
    assert core.store.list_jobs() == []
    granted = run(e, "submit", "--image", "busybox", "--priority", "10", "--", "true")
    assert granted.exit_code == 0, granted.output


def test_submit_yaml_spec_flags_override(env):
    e, core, tmp = env
    spec = tmp / "job.yaml"
    spec.write_text(
        "framework: pytorch:2.3\ngpus: 4\nmem: 8G\ncommand: python train.py --epochs 3\n"
        "env:\n  NCCL_DEBUG: INFO\nretries: 2\n"
    )
    result = run(e, "submit", "-f", str(spec), "--gpus", "1")
    assert result.exit_code == 0, result.output
    job = core.store.get_job(result.output.split()[0])
    assert job.spec.gpus == 1 and job.spec.mem_mib == 8192 and job.spec.retries == 2
    assert job.spec.command == ("sh", "-c", "python train.py --epochs 3")
    assert job.spec.env == {"NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["--framework", "pytorch:9.9"], "known: pytorch:2.3", id="unknown-version"),
        pytest.param(
            ["--image", "x", "--gpus", "-1"],
            "gpus: must be between 0 and 64, got -1; pass --gpus N with 0 <= N <= 64",
            id="negative-gpus",
        ),
        pytest.param(["--image", "x", "-v", "/etc:/host-etc"], "allowed: /data", id="volume"),
        pytest.param(["--image", "x", "--mem", "lots"], "mem: 'lots' is not a size", id="mem"),
        pytest.param(["--gpus", "1"], "framework: give a framework", id="no-framework"),
        pytest.param(["-f", "/nonexistent.yaml"], "spec: cannot read", id="missing-file"),
    ],
)
def test_submit_errors_are_one_line(env, args, message):
    e, *_ = env
    result = run(e, "submit", *args)
    assert result.exit_code != 0
    assert message in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "Traceback" not in result.output


def test_gpus_more_than_any_agent(env):
    e, core, _ = env
    core.note_agent("a1", set(range(8)))
    result = run(e, "submit", "--image", "x", "--gpus", "16")
    assert result.exit_code != 0
    assert "no agent has more than 8" in result.output


def test_jobs_status_kill_logs(env):
    e, core, _ = env
    job_id = run(e, "submit", "--image", "busybox", "--name", "mnist", "--", "true").output.split()[
        0
    ]
    listing = run(e, "jobs")
    assert listing.exit_code == 0 and job_id in listing.output and "queued" in listing.output
    assert "mnist" in listing.output
    status = run(e, "status", job_id)
    assert status.exit_code == 0 and "queued" in status.output and "busybox" in status.output
    logs = run(e, "logs", job_id)
    assert logs.exit_code == 3 and logs.stdout == ""
    assert logs.stderr.strip() == (
        f"Error: job {job_id} is queued: no logs yet (dlc logs -f {job_id} waits for them)"
    )
    killed = run(e, "kill", job_id)
    assert killed.exit_code == 0 and killed.output.strip() == f"{job_id} killed"
    assert "killed" in run(e, "status", job_id).output


def test_submit_gpus_0_places_a_cpu_only_job_and_every_view_says_so(env):
    e, core, _ = env
    result = run(e, "submit", "--image", "busybox", "--gpus", "0", "--cpus", "2", "--", "true")
    assert result.exit_code == 0, result.output
    job_id = result.output.split()[0]
    assert core.store.get_job(job_id).spec.is_cpu_only
    core.on_offers([offer("o1", "a1", [])])  # an agent with no GPU at all
    row = next(line for line in run(e, "jobs").output.splitlines() if job_id in line)
    assert "CPU only" in row and "host-a1 " in row and "host-a1:" not in row and "1x0" not in row
    status = run(e, "status", job_id).output
    assert "gpus: none (CPU only: 2 cpus, 1024 MiB x 1 node(s))" in status
    assert "launching on host-a1 (CPU only)" in status


def test_other_users_job_not_found(env):
    e, core, _ = env
    bob = {**e, "DLC_TOKEN": core.store.add_token("bob")}
    job_id = run(e, "submit", "--image", "x").output.split()[0]
    result = run(bob, "status", job_id)
    assert result.exit_code != 0 and f"no job {job_id}" in result.output


def test_unreachable_api_one_line():
    result = CliRunner().invoke(cli, ["jobs", "--api", "http://127.0.0.1:9", "--token", "t"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot reach the DLC scheduler at http://127.0.0.1:9")
    assert "start it with `dlc scheduler` or `dlc local`" in result.output


@pytest.mark.parametrize(
    "text, mib",
    [("4096", 4096), ("512M", 512), ("16G", 16384), ("16GiB", 16384), ("1.5g", 1536)],
)
def test_parse_mem(text, mib):
    assert parse_mem(text) == mib


def test_parse_mem_rejects():
    with pytest.raises(JobSpecError, match="mem: "):
        parse_mem("16 parsecs")


@pytest.mark.parametrize("text", ["32", "1.5", "255"])
def test_a_bare_number_that_looks_like_gib_is_refused_with_a_hint(text):
    with pytest.raises(JobSpecError) as raised:
        parse_mem(text)
    assert str(raised.value) == (
        f"mem: {text} without a unit is {text} MiB, too little for a job; "
        f"write {text}G for GiB (or {text}M if you mean MiB)"
    )
    assert parse_mem(f"{text}M") == max(1, int(float(text)))  # an explicit unit still works
    assert parse_mem("256") == 256  # bare MiB as before from 256 on


def test_submit_mem_32_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--image", "x", "--mem", "32", "--", "true"])
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [
        "Error: mem: 32 without a unit is 32 MiB, too little for a job; write 32G for GiB "
        "(or 32M if you mean MiB)"
    ]


def test_logs_follow_prints_until_the_job_ends(env):
    e, core, tmp = env
    job_id = run(e, "submit", "--image", "x", "--", "train").output.split()[0]
    core.on_offers([offer_json("o1", "a1")])
    sandbox = agent_sandbox(tmp / "agents", f"{job_id}.0.0")
    out = sandbox / "stdout"
    out.write_text("epoch 1\n")
    task = {"task_id": {"value": f"{job_id}.0.0"}, "agent_id": {"value": "a1"}}
    core.on_status({**task, "state": "TASK_RUNNING"})

    def finish_later():
        time.sleep(0.5)
        with out.open("a") as fh:
            fh.write("epoch 2\n")
        time.sleep(0.3)
        core.on_status({**task, "state": "TASK_FINISHED"})

    threading.Thread(target=finish_later, daemon=True).start()
    result = run(e, "logs", "-f", "--interval", "0.1", job_id)
    assert result.exit_code == 0, result.output
    assert result.output == "epoch 1\nepoch 2\n"


def offer_json(oid, agent):
    return {
        "id": {"value": oid},
        "agent_id": {"value": agent},
        "hostname": agent,
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 8}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 8192}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}},
            {"name": "gpu_ids", "type": "SET", "set": {"item": ["0"]}},
        ],
    }


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_specs_are_valid(path):
    from dlc.images import resolve
    from dlc.scheduler.jobs.job import JobSpec

    spec = JobSpec.from_dict(load_spec_file(str(path)))
    if spec.framework:
        assert resolve(spec.framework).image  # the catalog knows every example's framework


def test_examples_exist():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize(
    "kind, label",
    [("emulator", "Mesos emulator: "), ("mesos", "Mesos UI: ")],
    ids=["emulator", "real-mesos"],
)
def test_submit_names_the_master_ui_honestly(tmp_path, kind, label):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")), _resolver)
    server = ApiServer(
        core, LogReader(lambda: None), lambda actions: None,
        framework_url=lambda: "http://m:5050/x", master_kind=lambda: kind,
    )  # fmt: skip
    server.start()
    try:
        e = {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice")}
        result = run(e, "submit", "--image", "x", "--", "true")
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert f"{label}http://m:5050/x" in result.stderr
    assert ("Mesos UI" in result.stderr) is (kind == "mesos")
