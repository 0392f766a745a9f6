"""Real ``dlc scheduler`` processes in HA: ZooKeeper, PostgreSQL, the real Mesos master.

The master (``scripts/mesos-local.sh``, with ``--zk``, ``--quorum=1`` and
``--registry=replicated_log``) is published in ZooKeeper by :mod:`tests.ha.announce`;
every scheduler runs ``dlc scheduler --master zk://.../mesos --zk zk://.../dlc --db
postgresql://...`` and finds the master through pymesos's ZooKeeper detector.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.fault import procs
from tests.fault.clusters import MESOS_SCRIPT, RESOURCES, ROOT, Cluster, ClusterError, free_port
from tests.real_mesos import executor_auth_vars


def http(method: str, url: str, token: str, body: dict | None = None) -> tuple[int, dict, dict]:
    """One request that does NOT follow redirects: (status, headers, JSON body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"{}")


class HaCluster(Cluster):
    """One master published in ZooKeeper and several ``dlc scheduler --zk`` instances."""

    backend = "ha"

    def __init__(self, run_dir: Path, run_id: str, zk_hosts: str, db_url: str):
        super().__init__(run_dir, run_id)
        self.zk_hosts, self.db_url = zk_hosts, db_url
        self.port = free_port()
        self.mesos_dir = run_dir / "mesos"
        executor_env = {"PATH": self.env["PATH"], "DLC_GPU_STYLE": "none", procs.MARKER: run_id}
        self.env.update(
            **executor_auth_vars(),  # the agent authenticates executors (docs/install.md)
            MESOS_RESOURCES=RESOURCES,
            MESOS_EXECUTOR_ENVIRONMENT_VARIABLES=json.dumps(executor_env),
            MESOS_ZK=f"zk://{zk_hosts}/mesos", MESOS_QUORUM="1",
            MESOS_REGISTRY="replicated_log", MESOS_ZK_SESSION_TIMEOUT="3secs",
            VENV=str(Path(sys.executable).parent.parent),
        )  # fmt: skip
        self.announcer: subprocess.Popen | None = None
        self.schedulers: dict[int, subprocess.Popen] = {}  # api port -> process

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_master(self, new_port: bool = False) -> None:
        """Start the master (same work dir: its replicated log is recovered) and publish it.

        ``new_port``: on another port, so a scheduler can only find it through ZooKeeper.
        """
        if new_port:
            self.port = free_port()
            # The agent lives in the same process and checkpointed its old address: on a
            # new port its recovery refuses ("Incompatible agent info"), so it joins anew
            # (the master's replicated log, where the registry lives, is kept).
            for latest in self.mesos_dir.glob("work/agents/*/work/meta/slaves/latest"):
                latest.unlink()
        self.mesos_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["bash", str(MESOS_SCRIPT), "start", str(self.port), str(self.mesos_dir)],
            env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if proc.returncode != 0:
            raise ClusterError(f"real Mesos did not start: {(proc.stderr or proc.stdout).strip()}")
        self.announcer = subprocess.Popen(
            [sys.executable, "-m", "tests.ha.announce", self.zk_hosts, "/mesos", self.address,
             str(self.host_pid())],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        line = self.announcer.stdout.readline()
        if not line.startswith("announced"):
            raise ClusterError(f"the master was not published in ZooKeeper: {line.strip()}")

    def host_pid(self) -> int:
        return int((self.mesos_dir / "host.pid").read_text())

    def kill_master(self) -> None:
        """SIGKILL the master+agent process; its ZooKeeper node goes with it."""
        pid = self.host_pid()
        procs.kill(pid)
        deadline = time.monotonic() + 20
        while _alive(pid):
            if time.monotonic() > deadline:
                raise ClusterError(f"mesos-local host {pid} survived SIGKILL")
            time.sleep(0.05)
        self.announcer.wait(timeout=10)

    def start_scheduler(self) -> int:
        """Start one ``dlc scheduler --zk`` instance; returns its API port."""
        port = free_port()
        self.schedulers[port] = self._spawn(f"scheduler-{port}", [
            sys.executable, "-m", "dlc", "scheduler",
            "--master", f"zk://{self.zk_hosts}/mesos", "--zk", f"zk://{self.zk_hosts}/dlc",
            "--db", self.db_url, "--api-port", str(port),
            "--sandbox-root", str(self.mesos_dir / "work"), "--refuse-seconds", "1",
        ])  # fmt: skip
        return port

    def health(self, port: int) -> dict | None:
        try:
            return http("GET", f"http://127.0.0.1:{port}/v1/health", "")[2]
        except OSError:
            return None

    def leader(self, timeout_s: float = 60.0, among: list[int] | None = None) -> int:
        """The API port of the instance that leads (waits for one)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for port in among or list(self.schedulers):
                h = self.health(port)
                if h and h.get("leading"):
                    return port
            time.sleep(0.2)
        raise ClusterError(f"no instance leads after {timeout_s:g} s")

    def stop(self) -> None:
        for proc in self.schedulers.values():
            if proc.poll() is None:
                procs.kill(proc.pid, signal.SIGTERM)
        for proc in self.schedulers.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                procs.kill(proc.pid)
        if (self.mesos_dir / "host.pid").exists():
            subprocess.run(["bash", str(MESOS_SCRIPT), "stop", str(self.mesos_dir)],
                           env=self.env, timeout=60)  # fmt: skip
        if self.announcer is not None and self.announcer.poll() is None:
            self.announcer.kill()
        self.kill_run_processes()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
