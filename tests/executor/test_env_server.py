"""Interactive jobs: the port, the token, the command, and the idle stop (no engine needed)."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from dlc.errors import JobSpecError
from dlc.executor.container_spec import TaskIdentity, create_kwargs
from dlc.executor.env_server import IdleWatch, parse_last_activity
from dlc.executor.gpu_render import GpuContainerArgs
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.launch import JUPYTER_COMMAND, ExecutorConfig, env_secret
from tests.scheduler.helpers import job, offer, place

CONFIG = ExecutorConfig(job_key="k")


def _spec(j) -> LaunchSpec:
    (launch,) = place([offer("o1", "a1")], [j], PlacementConfig("first-fit")).launches
    return LaunchSpec.decode(build_task_info(j, launch, None, CONFIG)["data"])


def test_interactive_job_publishes_a_port_from_the_offer_with_its_token():
    spec = _spec(job("e", interactive=True, idle_timeout_s=60))
    assert spec.publish == ((8888, 31000),) and spec.ports == (31000,)
    assert spec.env["JUPYTER_TOKEN"] == env_secret("k", "e") and spec.idle_timeout_s == 60
    assert spec.command == ()  # an --image of one's own serves by its own CMD
    kwargs = create_kwargs(spec, TaskIdentity("fw", "ex", "t", "e"), GpuContainerArgs())
    assert kwargs["ports"] == {"8888/tcp": 31000} and kwargs["network_mode"] == "bridge"


def test_framework_environment_runs_jupyterlab_and_batch_jobs_publish_nothing():
    body = {"framework": "pytorch:2.3", "image": "pytorch/pytorch:2.3.1", "interactive": True}
    spec = _spec(job("e", **body))
    assert spec.command == JUPYTER_COMMAND
    batch = _spec(job("b"))
    assert batch.publish == () and "JUPYTER_TOKEN" not in batch.env and batch.idle_timeout_s == 0


def test_interactive_spec_checks():
    with pytest.raises(JobSpecError, match="an environment runs on one node"):
        job("e", interactive=True, nodes=2)
    with pytest.raises(JobSpecError, match="must be true or false"):
        job("e", interactive="yes")


def test_parse_last_activity():
    assert parse_last_activity(b'{"last_activity": "2026-01-01T00:00:10Z"}') == 1767225610.0
    assert parse_last_activity(b'{"last_activity": "2026-01-01T00:00:10.5+00:00"}') == 1767225610.5
    assert parse_last_activity(b"{}") is None and parse_last_activity(b"junk") is None


class _Status(http.server.BaseHTTPRequestHandler):
    last = "2026-01-01T00:00:00Z"

    def do_GET(self):  # noqa: N802
        ok = self.path.endswith("token=tok")
        body = json.dumps({"last_activity": _Status.last}).encode() if ok else b"no"
        self.send_response(200 if ok else 403)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def status_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_idle_watch_stops_only_after_the_idle_time(status_server):
    spec = LaunchSpec("e", "img", env={"JUPYTER_TOKEN": "tok"}, publish=((8888, status_server),),
                      idle_timeout_s=60)  # fmt: skip
    now = [1767225600.0 + 30]  # 30 s after the server's last activity
    stopped = []
    watch = IdleWatch(spec, lambda: stopped.append(1), clock=lambda: now[0])
    watch.started = 1767225600.0 - 100  # the container started before that activity
    assert watch.check() is False and not stopped
    now[0] += 31
    assert watch.check() is True and stopped == [1]
    assert watch.reason == "stopped: idle for 61 s (limit 60 s)"


def test_a_silent_server_is_idle_from_the_container_start():
    spec = LaunchSpec("e", "img", publish=((8888, 1),), idle_timeout_s=10)  # nothing on port 1
    now = [1000.0]
    watch = IdleWatch(spec, lambda: None, clock=lambda: now[0])
    assert watch.check() is False
    now[0] += 10
    assert watch.check() is True
