"""Red-team 2026-11-26 (second pass): a link a job plants in ``/outputs``, read through a REAL
Mesos agent's ``/files/read`` (the path ``dlc cp`` takes on a cluster, where the scheduler does
not see the sandbox), must not hand the job's user a host file.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from tests.e2e.test_cp_remote_binary import ADMIN, IMAGE, _wait, service  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.mesos]


def test_a_planted_link_in_outputs_reads_no_host_file(service, tmp_path, monkeypatch):  # noqa: F811
    import dlc.api.env_routes as env_routes

    secret = tmp_path / "host-secret"
    secret.write_text("root-only host data\n")
    os.chmod(secret, 0o600)
    script = f"ln -s {secret} /outputs/leak && ln -s / /outputs/root && echo plain > /outputs/plain"
    env = {"DLC_API": service.api_url, "DLC_TOKEN": ADMIN}
    runner = CliRunner()
    args = ["submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5", "--mem", "128M"]
    submitted = runner.invoke(cli, [*args, "--", "sh", "-c", script], env=env)
    assert submitted.exit_code == 0, submitted.output
    job = _wait(service, submitted.output.split()[0])
    assert job.state.value == "finished", job.message

    # what the agent itself answers for the sandbox path of the planted links
    state = json.load(urllib.request.urlopen(f"{service._master_url().rstrip('/')}/master/slaves"))
    agent = state["slaves"][0]["pid"].split("@", 1)[1]
    fid, eid = service.core.framework_id, job.tasks[0].executor_id
    for name in ("plain", "leak", f"root{secret}"):
        virtual = f"/frameworks/{fid}/executors/{eid}/runs/latest/outputs/{name}"
        query = urllib.parse.urlencode({"path": virtual, "offset": 0, "length": 4096})
        try:
            body = urllib.request.urlopen(f"http://{agent}/files/read?{query}").read()
        except urllib.error.HTTPError as exc:
            body = f"HTTP {exc.code} {exc.read()[:100]!r}".encode()
        print(name, body[:200])
        if name == "plain":
            assert b"plain" in body  # the path is right: a plain file reads
        assert b"root-only host data" not in body

    monkeypatch.setattr(env_routes, "_local_sandbox", lambda logs, task: None)
    dest = tmp_path / "copied"
    copied = runner.invoke(cli, ["cp", f"{job.job_id}:leak", str(dest)], env=env)
    print(copied.output)
    assert not dest.exists() or b"root-only" not in dest.read_bytes()
