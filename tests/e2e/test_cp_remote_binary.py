"""`dlc cp` of a binary file through a REAL Mesos agent's `/files/read`, byte for byte.

On a cluster the scheduler's host does not see the agents' sandboxes: `dlc cp` reads them
through the agent's `/files/read`, which writes the file's bytes into a JSON string as they
are. A checkpoint (random bytes, most of them not UTF-8, control characters included) used
to come back decoded as text (or not at all). Here the scheduler is made to take the remote
path (`_local_sandbox` answers nothing, as on another host) and the copy must equal the file
the container wrote, checked against the sandbox file itself.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_FRAMEWORK
from tests.real_mesos import RealMesos, ensure_built, venv_env

pytestmark = [pytest.mark.docker, pytest.mark.mesos]

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3}"
ADMIN = "cp-binary-admin-token"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.executor.runtime import DockerRuntime
    from dlc.scheduler.tasks.launch import ExecutorConfig

    work = tmp_path_factory.mktemp("cp-binary")
    env = venv_env(MESOS_RESOURCES=RESOURCES)
    ensure_built(env)
    mesos = RealMesos(work / "mesos", env)
    address = mesos.start()
    command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
    svc = SchedulerService(
        ServiceConfig(master=address, db=str(work / "db"), api_port=0, admin_token=ADMIN,
                      executor=ExecutorConfig(command=command))
    )  # fmt: skip
    svc.start()
    svc.test_run_dir = mesos.run_dir  # the agent's work dir: where the test reads the truth
    try:
        assert svc.framework.registered.wait(30), "framework did not register"
        yield svc
    finally:
        framework_id = svc.core.framework_id
        svc.stop()
        runtime = DockerRuntime()
        runtime.remove_all(runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)
        mesos.stop()


def _wait(svc, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = svc.store.get_job(job_id)
        if job.state.terminal:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} stuck in {svc.store.get_job(job_id).state}")


def test_cp_of_random_bytes_from_the_agents_files_endpoint_is_exact(service, tmp_path, monkeypatch):
    import dlc.api.env_routes as env_routes

    # 2.5 MiB of random bytes (three 1 MiB chunks), then every byte value once
    script = ("head -c 2621440 /dev/urandom > /outputs/ckpt.bin && "
              "printf \"$(printf '\\\\%03o' $(seq 0 255))\" >> /outputs/ckpt.bin")  # fmt: skip
    env = {"DLC_API": service.api_url, "DLC_TOKEN": ADMIN}
    runner = CliRunner()
    args = ["submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5", "--mem", "128M"]
    submitted = runner.invoke(cli, [*args, "--", "sh", "-c", script], env=env)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    job = _wait(service, job_id)
    assert job.state.value == "finished", job.message
    found = list(service.test_run_dir.glob(f"**/executors/{job.tasks[0].executor_id}/**/ckpt.bin"))
    assert found, "the file is in the agent's sandbox"
    want = found[0].read_bytes()
    assert len(want) == 2621440 + 256 and want[-256:] == bytes(range(256))

    # as on a cluster: the scheduler cannot see the agent's sandbox
    monkeypatch.setattr(env_routes, "_local_sandbox", lambda logs, task: None)
    dest = tmp_path / "ckpt.bin"
    copied = runner.invoke(cli, ["cp", f"{job_id}:ckpt.bin", str(dest)], env=env)
    assert copied.exit_code == 0, copied.output
    got = dest.read_bytes()
    assert len(got) == len(want)
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(want).hexdigest()
