"""Interactive environments on the emulator (`dlc local`'s master) and the REAL Mesos master.

`dlc submit --interactive` with a small locally built image that answers like JupyterLab
(tests/e2e/envhttp: token required, `/api/status` with `last_activity`) on a port DLC took from
the offer: `dlc open` prints the URL, the URL answers, the token is required, another user
gets no URL, `dlc exec` runs a command in the container and returns its exit code (not for
another user), and the environment stops by itself once idle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.test_workdir_outputs import _cli, _wait, service  # noqa: F401 (fixture)

pytestmark = [pytest.mark.docker, pytest.mark.browser]

ENV_IMAGE = "dlc-test/envhttp:1"


@pytest.fixture(scope="module")
def env_image():
    """Build the stand-in server image from the local test image (no network)."""
    import docker

    client = docker.from_env()
    client.images.build(path=str(Path(__file__).parent / "envhttp"), tag=ENV_IMAGE, rm=True)
    return ENV_IMAGE


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _shell(svc, token: str, job_id: str, script: bytes) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLC_API": svc.api_url, "DLC_TOKEN": token}
    return subprocess.run([sys.executable, "-m", "dlc", "shell", job_id], input=script,
                          capture_output=True, env=env, timeout=60)  # fmt: skip


def _dashboard_links(svc, token: str, job_id: str, url: str, tmp_path: Path) -> None:
    """The job page of the dashboard (headless chromium, signed in) links the environment."""
    from tests.web.browser import start_chromium
    from tests.web.test_dashboard_browser import sign_in, wait_for

    driver = start_chromium(tmp_path / "profile", 1200, 900)
    try:
        sign_in(driver, svc.api_url + "/", token)
        wait_for(driver, "return document.getElementById('login-view').hidden")
        driver.get(f"{svc.api_url}/#/jobs/{job_id}")
        href = wait_for(driver, "const a = document.getElementById('env-link');"
                                " return a && a.getAttribute('href');")  # fmt: skip
        assert href == url
    finally:
        driver.quit()


def test_environment_url_answers_needs_its_token_and_stops_when_idle(service, env_image, tmp_path):  # noqa: F811, E501
    alice = service.store.add_token("env-alice")
    bob = service.store.add_token("env-bob")
    args = ["submit", "--image", env_image, "--interactive", "--idle-timeout", "10",
            "--gpus", "1", "--cpus", "0.5", "--mem", "128M"]  # fmt: skip
    submitted = _cli(service, alice, *args)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    assert f"dlc open {job_id}" in submitted.output  # the hint (stderr, mixed in by CliRunner)
    opened = _cli(service, alice, "open", job_id, "--wait", "60")
    assert opened.exit_code == 0, opened.output
    url = opened.output.strip().splitlines()[-1]
    assert url.startswith("http://") and "/lab?token=" in url
    port = int(url.split(":")[2].split("/")[0])
    assert 31000 <= port <= 31100  # from the agent's ports resource
    assert _status(url) == (200, "hello from the lab")
    assert f"url: {url}" in _cli(service, alice, "status", job_id).output
    assert _status(url.split("?")[0])[0] == 403  # no token
    assert _status(url[:-4] + "0000")[0] == 403  # a wrong one

    _dashboard_links(service, alice, job_id, url, tmp_path)
    assert _status(url)[0] == 200  # activity: the steps below fit well inside the idle limit

    refused = _cli(service, bob, "open", job_id, "--wait", "0")
    assert refused.exit_code != 0 and url not in refused.output

    # dlc exec: the command runs in the container, its exit code comes back; bob is refused
    ran = _cli(service, alice, "exec", job_id, "--", "sh", "-c", "echo in $(hostname); exit 3")
    assert ran.exit_code == 3, ran.output
    assert ran.output.startswith("in ")
    assert _cli(service, alice, "exec", job_id, "--", "true").exit_code == 0
    stranger = _cli(service, bob, "exec", job_id, "--", "true")
    assert stranger.exit_code not in (0, 3) and "no job" in stranger.output.lower()

    assert _status(url)[0] == 200  # activity again
    # dlc shell: a scripted session through API websocket -> executor -> docker exec -it
    shell = _shell(service, alice, job_id, b"echo h$((40+2))i; exit 3\n")
    assert shell.returncode == 3, shell.stderr
    assert b"h42i" in shell.stdout  # computed in the container, not the echo of the input
    refused = _shell(service, bob, job_id, b"echo h$((40+2))i\n")
    assert refused.returncode == 1 and b"h42i" not in refused.stdout
    assert "no job" in refused.stderr.decode().lower()

    job = _wait(service, job_id, timeout=90)  # idle stop: 10 s after the last request
    assert job.state.value == "finished", job.message
    assert "stopped: idle for" in job.message
