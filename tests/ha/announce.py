"""Publish a running Mesos master in ZooKeeper the way Mesos's own ZooKeeper contender does.

``python -m tests.ha.announce ZK_HOSTS ZK_PATH MASTER_ADDR HOST_PID`` reads the master's
``/master/state`` and creates the ephemeral sequential znode ``ZK_PATH/json.info_NNNNNNNNNN``
holding its MasterInfo as JSON (``address.{hostname,ip,port}``, ``id``, ``pid``, ``version``),
the node a Mesos master writes when it is elected and that pymesos's detector reads. It keeps
the node while the master's process lives and exits (its session closes, the node goes)
when that process ends.

Why a stand-in: the shared mesos-local host runs Mesos's in-process local cluster
(``src/local/local.cpp``), which accepts ``--zk``/``--quorum``/``--registry=replicated_log``
but always builds the master with a *standalone* contender and detector: it never writes
to ZooKeeper itself (docs/ha.md, "Master HA").
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

from kazoo.client import KazooClient


def master_info(addr: str) -> dict:
    """The MasterInfo JSON a Mesos master publishes, read from its ``/master/state``."""
    with urllib.request.urlopen(f"http://{addr}/master/state", timeout=5) as resp:
        state = json.load(resp)
    host, port = addr.split(":")
    return {
        "id": state["id"], "pid": state["pid"], "hostname": state["hostname"],
        "port": int(port), "version": state.get("version", "1.11.0"),
        "address": {"hostname": state["hostname"], "ip": host, "port": int(port)},
    }  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(hosts: str, path: str, addr: str, pid: int) -> int:
    zk = KazooClient(hosts=hosts, timeout=5)
    zk.start(timeout=15)
    zk.ensure_path(path)
    node = zk.create(f"{path}/json.info_", json.dumps(master_info(addr)).encode(),
                     ephemeral=True, sequence=True)  # fmt: skip
    print(f"announced {node}", flush=True)
    while _alive(pid):
        time.sleep(0.1)
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
