"""A real JupyterLab started through DLC, opened by headless chromium (`make e2e-jupyter`).

Not collected by the normal suite (no ``test_`` prefix): it needs the locally built
``dlc-local/jupyterlab:4`` image (scripts/e2e-jupyter.sh builds it from PyPI wheels) and runs
only when named: ``pytest tests/e2e/jupyter_e2e.py``. It FAILS when the image is missing.
On ``dlc local`` (a simulated DGX-1 with ``--gpu-mem 32768``) and on the REAL Mesos master
(an agent with GPU-share ranges), with the real Docker engine and ``dlc executor``: ``dlc
submit --interactive --gpus 0.5 --gpu-memory 4G`` (a notebook on a share of a GPU), ``dlc
open`` prints the URL, chromium loads it and finds JupyterLab's main area and launcher, ``dlc
exec`` runs in the same container and sees the share; without the token the server asks for
one.
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.test_env_share_tty import service  # noqa: F401 (fixture: dlc local, real master)
from tests.e2e.test_workdir_outputs import _cli, _wait
from tests.web.browser import start_chromium

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IMAGE = os.environ.get("DLC_JUPYTER_IMAGE", "dlc-local/jupyterlab:4")
WORK = Path(os.environ.get("DLC_E2E_WORK", "/tmp/dlc-e2e-jupyter"))


def test_jupyterlab_opens_in_chromium(service, tmp_path):  # noqa: F811
    import docker

    try:
        docker.from_env().images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} missing: make e2e-jupyter", pytrace=False)
    alice = service.store.add_token("jupyter-alice")
    started = time.monotonic()
    submitted = _cli(service, alice, "submit", "--image", IMAGE, "--interactive",
                     "--gpus", "0.5", "--gpu-memory", "4G", "--cpus", "1",
                     "--mem", "1G")  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    opened = _cli(service, alice, "open", job_id, "--wait", "120")
    assert opened.exit_code == 0, opened.output
    url = opened.output.strip().splitlines()[-1]
    driver = start_chromium(tmp_path / "profile")
    try:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ready
        from selenium.webdriver.support.ui import WebDriverWait

        # the server may still be starting when its port is published: retry the load
        deadline = time.monotonic() + 120
        while True:
            try:
                driver.get(url)  # a refused or reset load raises; JupyterLab may still be starting
                WebDriverWait(driver, 20).until(
                    ready.presence_of_element_located((By.CSS_SELECTOR, ".jp-Launcher"))
                )
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        loaded_s = time.monotonic() - started
        assert driver.find_element(By.ID, "jp-main-dock-panel")
        assert "JupyterLab" in driver.title
        ran = _cli(service, alice, "exec", job_id, "--", "sh", "-c",
                   "echo $DLC_GPU_MEMORY_MIB; command -v jupyter")  # fmt: skip
        assert ran.output == "4096\n/opt/jupyter/bin/jupyter\n", ran.output
        WORK.mkdir(parents=True, exist_ok=True)
        shot = WORK / "jupyterlab.png"  # the newest run
        driver.save_screenshot(str(shot))
        print(f"\nJupyterLab of {job_id} loaded in chromium {loaded_s:.1f} s after submit; {shot}")
        # without the token (and without the browser's login cookie) JupyterLab sends one to
        # its login form, never the lab
        with urllib.request.urlopen(url.split("?")[0], timeout=30) as resp:  # noqa: S310
            assert "/login" in resp.url and b"password" in resp.read()
    finally:
        driver.quit()
        killed = _cli(service, alice, "kill", job_id)
    assert killed.exit_code == 0, killed.output
    job = _wait(service, job_id, timeout=120)  # JupyterLab's stop took 20 s on a busy host
    assert job.state.value == "killed", job.message
