"""Red-team 2026-11-26 (second pass), finding 35: a host-network job took DLC's framework over.

A ``--nodes 2`` job runs with the host's network, so it shares loopback with ``dlc local``'s
Mesos emulator. The emulator's scheduler API took any caller: shown from such a job (busybox
``nc``, uid 65534), a ``SUBSCRIBE`` with DLC's framework id (printed in every job's
``framework_url``) failed DLC over ("Framework failed over" in the scheduler log), and a new
framework could subscribe too and, given an offer, ``ACCEPT`` a command task that the emulator
runs on the host as ``dlc local``'s user. Now ``dlc local`` draws a framework secret: scheduler
calls without it get ``401``, and DLC's own driver still registers.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from dlc.app.local import LocalCluster, LocalConfig
from dlc.mesos.emulator.cluster import MesosEmulator
from tests.app.test_local import DGX1, STAND_IN


def _scheduler_call(address: str, call: dict, authorization: str | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(
        f"http://{address}/api/v1/scheduler", data=json.dumps(call).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _subscribe(framework_id: str | None = None) -> dict:
    info: dict = {"user": "x", "name": "dlc"}
    call: dict = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}
    if framework_id:
        info["id"] = {"value": framework_id}
        call["framework_id"] = {"value": framework_id}
    return call


def test_an_emulator_with_a_credential_refuses_scheduler_calls_without_it():
    with MesosEmulator(framework_credential=("dlc", "s3cret")) as mesos:
        assert _scheduler_call(mesos.address, _subscribe()) == 401
        assert _scheduler_call(mesos.address, _subscribe(), "Basic ZGxjOndyb25n") == 401
        teardown = {"type": "TEARDOWN", "framework_id": {"value": "x"}}
        assert _scheduler_call(mesos.address, teardown) == 401
        assert not mesos.master.frameworks


def test_dlc_local_registers_and_a_loopback_stranger_cannot_take_its_framework(tmp_path):
    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path), api_port=0, executor_command=STAND_IN
    )
    cluster = LocalCluster(config).start()
    try:
        framework_id = cluster.service.core.framework_id
        assert framework_id and cluster.service.framework.registered.is_set()
        address = cluster.emulator.address
        assert _scheduler_call(address, _subscribe(framework_id)) == 401  # no failover
        assert _scheduler_call(address, _subscribe()) == 401  # no second framework
        assert list(cluster.emulator.master.frameworks) == [framework_id]
        assert cluster.emulator.master.frameworks[framework_id].stream is not None
    finally:
        cluster.stop()
