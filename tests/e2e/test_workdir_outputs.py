"""Code in, results out, on the emulator (`dlc local`'s master) and the REAL Mesos master.

`dlc submit --workdir DIR` uploads a snapshot (ignored files stay home); the executor fetches it
with the job's secret and mounts it at /workspace, the job's working directory; the job writes
/outputs/result.txt, which `dlc cp` brings back. Another user's token is refused on the job's
outputs, the snapshot route refuses a missing or wrong secret, and a user cannot run a job on
another user's snapshot.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_FRAMEWORK
from tests.real_mesos import RealMesos, ensure_built, venv_env

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3}"
ADMIN = "workdir-admin-token"


@pytest.fixture(scope="module", params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def service(request, tmp_path_factory):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime
    from dlc.scheduler.tasks.launch import ExecutorConfig

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    work = tmp_path_factory.mktemp(request.param)
    stop = None
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        emulator = MesosEmulator(agents=[AgentSpec(resources=RESOURCES)], work_dir=work / "em")
        address, roots = emulator.__enter__(), (str(work / "em"),)
        address, stop = emulator.address, lambda: emulator.__exit__(None, None, None)
    else:
        env = venv_env(MESOS_RESOURCES=RESOURCES)
        ensure_built(env)
        mesos = RealMesos(work / "mesos", env)
        address, roots, stop = mesos.start(), (), mesos.stop
    command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
    svc = SchedulerService(
        ServiceConfig(master=address, sandbox_roots=roots, db=str(work / "db"), api_port=0,
                      executor=ExecutorConfig(command=command), admin_token=ADMIN)
    )  # fmt: skip
    svc.start()
    try:
        assert svc.framework.registered.wait(30), "framework did not register"
        yield svc
    finally:
        framework_id = svc.core.framework_id
        svc.stop()
        runtime.remove_all(runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)
        stop()


def _cli(svc, token, *args):
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": token}
    return CliRunner().invoke(cli, list(args), env=env)


def _wait(svc, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = svc.store.get_job(job_id)
        if job.state.terminal:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} stuck in {svc.store.get_job(job_id).state}")


def _get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_workdir_in_outputs_out_and_other_users_locked_out(service, tmp_path):
    alice = service.store.add_token("alice")
    bob = service.store.add_token("bob")
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "run.sh").write_text("echo in $(pwd); cat pkg/data.txt; ls; "
                                 "cat pkg/data.txt > /outputs/result.txt\n")  # fmt: skip
    (code / "pkg" / "data.txt").write_text("payload 42\n")
    (code / "big.ckpt").write_text("x" * 1000)
    (code / ".dlcignore").write_text("*.ckpt\n")
    submitted = _cli(service, alice, "submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5",
                     "--mem", "128M", "--workdir", str(code), "--", "sh", "run.sh")  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    job = _wait(service, job_id)
    logs = _cli(service, alice, "logs", job_id).output
    assert job.state.value == "finished", (job.message, logs)
    assert "in /workspace" in logs and "payload 42" in logs
    assert "big.ckpt" not in logs and "run.sh" in logs  # the ignored file stayed home

    dest = tmp_path / "result.txt"
    copied = _cli(service, alice, "cp", f"{job_id}:result.txt", str(dest))
    assert copied.exit_code == 0, copied.output
    assert dest.read_text() == "payload 42\n"

    # another user: the job does not exist for them
    refused = _cli(service, bob, "cp", f"{job_id}:result.txt", str(tmp_path / "stolen"))
    assert refused.exit_code != 0 and not (tmp_path / "stolen").exists()
    assert not (tmp_path / "stolen.part").exists()  # nothing left behind either
    assert "no job" in refused.output.lower() or "not found" in refused.output.lower()
    # the snapshot route wants the job's secret
    url = f"{service.api_url}/agent/v1/jobs/{job_id}/workdir"
    assert _get(url)[0] == 403
    assert _get(url, {"X-DLC-Job-Secret": "0" * 64})[0] == 403
    # a path out of /outputs is refused
    escape = _cli(service, alice, "cp", f"{job_id}:../stdout", str(tmp_path / "x"))
    assert escape.exit_code != 0 and "is not a file inside /outputs" in escape.output


def test_job_on_another_users_snapshot_is_refused_by_the_api(service, tmp_path):
    alice = service.store.add_token("alice2")
    bob = service.store.add_token("bob2")
    (tmp_path / "a.txt").write_text("alice's code\n")
    from dlc.api.client import ApiClient
    from dlc.cli.snapshot import make_snapshot, upload_snapshot

    blob = upload_snapshot(ApiClient(service.api_url, alice), make_snapshot(tmp_path))
    spec = {"image": IMAGE, "gpus": 1, "cpus": 0.5, "mem_mib": 128, "workdir": blob,
            "command": ["cat", "a.txt"]}  # fmt: skip
    job = ApiClient(service.api_url, bob).submit(spec)
    done = _wait(service, job["id"])
    assert done.state.value == "failed"
    assert "refused the snapshot (403)" in done.message
    body = json.dumps({"data": "", "blob": blob}).encode()
    request = urllib.request.Request(f"{service.api_url}/v1/workdirs", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {bob}",
                                              "Content-Type": "application/json"})  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 409  # bob cannot append to alice's snapshot either


def _readme_submit_line() -> list[str]:
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "dlc submit --image dlc-test/busybox:1" in x)
    return shlex.split(line.strip())[1:]  # as written, without the leading `dlc`


def test_the_readme_laptop_example_runs_as_written(service, tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the README runs from the checkout
    submitted = _cli(service, ADMIN, *_readme_submit_line())
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    job = _wait(service, job_id)
    logs = _cli(service, ADMIN, "logs", job_id).output
    assert job.state.value == "finished", (job.message, logs)
    assert "trained on awk for 200 epochs: w=3.000 b=1.000" in logs
    monkeypatch.chdir(tmp_path)
    assert _cli(service, ADMIN, "cp", f"{job_id}:model.txt", ".").exit_code == 0
    assert (tmp_path / "model.txt").read_text() == "w=3.000 b=1.000\n"


def _workspaces(root) -> list[str]:
    from pathlib import Path

    return [str(p) for p in Path(root).rglob("workspace") if (p.parent / "stdout").exists()]


def test_hostile_snapshots_write_nothing_outside_and_fail_in_one_line(service, tmp_path):
    """Red-team 2026-11-26: snapshots that climbed out of the workspace through links wrote
    host files as root. Each must now fail its job with one line and leave nothing outside."""
    from pathlib import Path

    from dlc.api.client import ApiClient
    from dlc.cli.snapshot import make_snapshot, upload_snapshot
    from tests.executor.snapshot_attacks import (
        PLANTED,
        dot_link_escape,
        late_link_escape,
        link_chain_escape,
    )

    work = Path(service.config.db).parent  # the agents' sandboxes live below it
    alice = ApiClient(service.api_url, service.store.add_token("alice3"))
    # the attacker learns its sandbox path's length from a first job (/proc/self/mountinfo);
    # the test reads it from the disk: the chain's folder names are sized from it
    (tmp_path / "ok.txt").write_text("hello\n")
    first = alice.submit({"image": IMAGE, "gpus": 1, "cpus": 0.5, "mem_mib": 128,
                                     "workdir": upload_snapshot(alice, make_snapshot(tmp_path)),
                                     "command": ["sh", "-c", "cat ok.txt && echo more >> ok.txt "
                                                 "&& mkdir made"]})  # fmt: skip
    # unpacked as the container's uid: the job may change its workspace
    assert _wait(service, first["id"]).state.value == "finished"
    length = max(len(p) for p in _workspaces(work))
    attacks = {
        "chain": (link_chain_escape(length), "goes through the link a"),
        "d1": (dot_link_escape(), "goes through the link d1"),
        "late": (late_link_escape(), "stands where an earlier link's target walks through"),
    }
    outcomes = {}
    for name, (data, _) in attacks.items():
        blob = upload_snapshot(alice, data)
        job = alice.submit({"image": IMAGE, "gpus": 1, "cpus": 0.5, "mem_mib": 128,
                            "workdir": blob, "command": ["true"]})  # fmt: skip
        outcomes[name] = _wait(service, job["id"])
    assert list(work.rglob(PLANTED)) == []  # nothing outside (nor inside: refused up front)
    assert not Path("/tmp", PLANTED).exists()
    for name, (_, reason) in attacks.items():
        done = outcomes[name]
        assert done.state.value == "failed", (name, done.message)
        assert reason in done.message and "\n" not in done.message, (name, done.message)
