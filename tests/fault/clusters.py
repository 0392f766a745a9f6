"""The two clusters a fault run drives, and how each target is killed and brought back.

* :class:`RealCluster`: the real Mesos 1.11 ``mesos-local-host`` (master AND agent in ONE
  process, see ../shared/mesos-local) plus a ``dlc scheduler`` process.
* :class:`LocalCluster`: one ``dlc local`` process (emulator + scheduler + API) simulating a
  DGX-1 (8 GPUs; its executors run with ``DLC_GPU_STYLE=none``).

Targets: ``scheduler`` (SIGKILL ``dlc scheduler``, restart on the same DB), ``agent`` (SIGKILL
the mesos-local host, restart it on the same port and work dir: a combined master+agent crash,
since both live in that process), ``master`` (SIGSTOP the host for the outage, then SIGCONT:
the master hangs and, unavoidably, its in-process agent with it), ``local`` (SIGKILL ``dlc
local``, restart on the same work dir and ports), ``executor`` (SIGKILL one running ``dlc
executor``; the agent reports the task failed).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dlc.api.client import ApiClient
from tests.fault import procs
from tests.real_mesos import executor_auth_vars

ROOT = Path(__file__).resolve().parents[2]
MESOS_SCRIPT = ROOT / "scripts" / "mesos-local.sh"
TOPOLOGY = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
GPUS = 8
RESOURCES = (
    f"cpus:16;mem:32768;disk:10240;ports:[31000-31100];gpus:{GPUS};gpu_ids:{{0,1,2,3,4,5,6,7}}"
)
TOKEN = "fault-admin-token"
#: each simulated GPU's memory where the cluster offers GPU shares (``dlc local --gpu-mem``)
SHARE_GPU_MEM_MIB = 16384


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterError(RuntimeError):
    """A part of the cluster did not come (back) up."""


class Cluster:
    """What both clusters share: the API client, process bookkeeping, executor kills."""

    targets: tuple[str, ...] = ()
    backend = ""
    shares = False  # whether its agent offers GPU shares (gpu_mem ranges)

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir = run_dir
        self.run_id = run_id
        self.api_port = free_port()
        self.client = ApiClient(f"http://127.0.0.1:{self.api_port}", TOKEN, timeout_s=5)
        self.env = dict(os.environ, **{procs.MARKER: run_id, "DLC_ADMIN_TOKEN": TOKEN})
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env.get('PATH', '')}"
        self._starts: dict[str, int] = {}

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        n = self._starts[name] = self._starts.get(name, 0) + 1
        log = open(self.run_dir / f"{name}.{n}.log", "wb")  # noqa: SIM115 - the child holds it
        with log:
            return subprocess.Popen(
                argv,
                env=self.env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_api(
        self, proc: subprocess.Popen | None = None, name: str = "", timeout_s: float = 60.0
    ) -> bool:
        """Wait for the API; False when ``proc`` exited because another process took the API
        port between :func:`free_port` and its bind (a busy machine runs other tests: the
        caller starts again on a new port), a :class:`ClusterError` for anything else."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self.client.jobs()
                return True
            except Exception:  # noqa: BLE001 - not up yet
                if proc is not None and proc.poll() is not None:
                    return self._port_taken(proc, name)
                time.sleep(0.3)
        raise ClusterError(f"{self.backend}: the API did not come up in {timeout_s:g} s")

    def _port_taken(self, proc: subprocess.Popen, name: str) -> bool:
        log = self.run_dir / f"{name}.{self._starts[name]}.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        if "Address already in use" not in tail:
            raise ClusterError(f"{self.backend}: {name} exited {proc.returncode}: {tail[-300:]}")
        self.new_ports()
        return False

    def new_ports(self) -> None:
        """Pick new ports for the process serving the API."""
        self.api_port = free_port()
        self.client = ApiClient(f"http://127.0.0.1:{self.api_port}", TOKEN, timeout_s=5)

    def start_api_process(self, name: str, spawn) -> subprocess.Popen:
        """``spawn()`` (which starts the process serving the API on ``self.api_port``) until
        its API answers; at most 3 tries when a port was taken under it (``name``: the
        process's name in :meth:`_spawn`, whose log says why it exited)."""
        for _ in range(3):
            proc = spawn()
            if self.wait_api(proc, name):
                return proc
        raise ClusterError(f"{self.backend}: a port was taken 3 times in a row")

    def kill_executor(self, rng, busy=lambda: set(), eligible=lambda task_id: True,
                      timeout_s: float = 30.0, prefer_busy_s: float = 4.0):  # fmt: skip
        """SIGKILL one live executor, one whose container runs if any (``busy()``: their ids;
        waited for ``prefer_busy_s``), of a task ``eligible(task_id)`` accepts (the harness's:
        any of its jobs, whatever retries it has: the loss uses none); returns (detail, victim
        job id), victim ``None`` when no executor lived for ``timeout_s`` (the caller reports
        that as a run error; the harness's keeper job is relaunched within it after its own
        executor's loss, 10-25 s on a loaded machine)."""
        started = time.monotonic()
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            live = [
                p for p in procs.executors(self.run_id)
                if eligible(p.env.get("MESOS_EXECUTOR_ID", "").removeprefix("dlc-executor."))
            ]  # fmt: skip
            running = busy()
            if any(p.env.get("MESOS_EXECUTOR_ID") in running for p in live):
                live = [p for p in live if p.env.get("MESOS_EXECUTOR_ID") in running]
            elif time.monotonic() < started + prefer_busy_s:
                live = []  # wait a little for an executor with a running container
            if live:
                victim = rng.choice(live)
                executor_id = victim.env.get("MESOS_EXECUTOR_ID", "?")
                procs.kill(victim.pid)
                task = executor_id.removeprefix("dlc-executor.")
                return f"SIGKILL executor pid {victim.pid} ({executor_id})", task.rsplit(".", 2)[0]
            time.sleep(0.2)
        return "no live executor to kill", None

    def inject(self, target: str, outage_s: float, rng, busy=lambda: set(), eligible=None):
        """Inflict ``target``'s fault, wait ``outage_s``, bring it back; (detail, victim job).

        ``busy()`` gives the ids of executors whose container runs (an executor target
        prefers those); ``eligible(task_id)`` the tasks it may kill."""
        if target == "executor":
            return self.kill_executor(rng, busy, eligible or (lambda task_id: True))
        return self._inject(target, outage_s), None

    def _inject(self, target: str, outage_s: float) -> str:
        raise NotImplementedError

    def leftover_processes(self) -> list[procs.Proc]:
        """Executors and reapers of the run still alive: those carrying the run's marker and,
        found independently, those working inside the run's directory."""
        marked = [p for p in procs.run_processes(self.run_id) if p.kind in ("executor", "reaper")]
        pids = {p.pid for p in marked}
        return marked + [p for p in procs.under(self.run_dir) if p.pid not in pids]

    def stop(self) -> None:
        raise NotImplementedError

    def kill_run_processes(self) -> None:
        """Cleanup: SIGKILL whatever of this run still lives (all carry the run's marker)."""
        for p in procs.run_processes(self.run_id):
            procs.kill(p.pid)


class RealCluster(Cluster):
    """The real Mesos master+agent process and a ``dlc scheduler`` process."""

    targets = ("scheduler", "agent", "master", "executor")
    backend = "real"

    def __init__(self, run_dir: Path, run_id: str):
        super().__init__(run_dir, run_id)
        self.port = free_port()
        self.mesos_dir = run_dir / "mesos"
        executor_env = {"PATH": self.env["PATH"], "DLC_GPU_STYLE": "none", procs.MARKER: run_id}
        self.env.update(
            **executor_auth_vars(),  # the agent authenticates executors (docs/install.md)
            MESOS_RESOURCES=RESOURCES,
            MESOS_EXECUTOR_ENVIRONMENT_VARIABLES=json.dumps(executor_env),
            VENV=str(Path(sys.executable).parent.parent),
        )
        self.scheduler: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.start_master()
        self.start_scheduler()

    def start_master(self) -> None:
        self.mesos_dir.mkdir(parents=True, exist_ok=True)
        log = self.mesos_dir / "host.log"
        if log.exists():  # keep the crashed host's log
            log.rename(self.mesos_dir / f"host.{time.time():.0f}.log")
        proc = subprocess.run(
            ["bash", str(MESOS_SCRIPT), "start", str(self.port), str(self.mesos_dir)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise ClusterError(f"real Mesos did not start: {(proc.stderr or proc.stdout).strip()}")

    def host_pid(self) -> int:
        return int((self.mesos_dir / "host.pid").read_text())

    def start_scheduler(self) -> None:
        self.scheduler = self.start_api_process("scheduler", self._spawn_scheduler)

    def _spawn_scheduler(self) -> subprocess.Popen:
        return self._spawn(
            "scheduler",
            [
                sys.executable,
                "-m",
                "dlc",
                "scheduler",
                "--master",
                self.address,
                "--db",
                str(self.run_dir / "scheduler.db"),
                "--api-port",
                str(self.api_port),
                "--sandbox-root",
                str(self.mesos_dir / "work"),
                "--refuse-seconds",
                "1",
            ],
        )

    def _inject(self, target: str, outage_s: float) -> str:
        if target == "scheduler":
            pid = self.scheduler.pid
            procs.kill(pid)
            self.scheduler.wait()
            time.sleep(outage_s)
            self.start_scheduler()
            return f"SIGKILL dlc scheduler pid {pid}, restarted after {outage_s:.1f}s"
        pid = self.host_pid()
        if target == "agent":
            procs.kill(pid)
            _wait_gone(pid)
            time.sleep(outage_s)
            self.start_master()
            return f"SIGKILL mesos-local host {pid} (master+agent), restarted after {outage_s:.1f}s"
        if target == "master":
            procs.kill(pid, signal.SIGSTOP)
            time.sleep(outage_s)
            procs.kill(pid, signal.SIGCONT)
            return f"SIGSTOP mesos-local host pid {pid} (master+agent) for {outage_s:.1f}s"
        raise ValueError(f"target {target!r} is not one of {self.targets}")

    def stop(self) -> None:
        if self.scheduler is not None:
            procs.kill(self.scheduler.pid, signal.SIGTERM)
            try:
                self.scheduler.wait(timeout=15)
            except subprocess.TimeoutExpired:
                procs.kill(self.scheduler.pid)
        if (self.mesos_dir / "host.pid").exists():
            subprocess.run(
                ["bash", str(MESOS_SCRIPT), "stop", str(self.mesos_dir)], env=self.env, timeout=60
            )
        self.kill_run_processes()


class LocalCluster(Cluster):
    """One ``dlc local`` process simulating a DGX-1."""

    targets = ("local", "executor")
    backend = "local"
    shares = True

    def __init__(self, run_dir: Path, run_id: str):
        super().__init__(run_dir, run_id)
        self.mesos_port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = self.start_api_process("local", self._spawn_local)

    def new_ports(self) -> None:
        super().new_ports()
        self.mesos_port = free_port()

    def _spawn_local(self) -> subprocess.Popen:
        return self._spawn(
            "local",
            [
                sys.executable,
                "-m",
                "dlc",
                "local",
                "--simulate",
                str(TOPOLOGY),
                "--work-dir",
                str(self.run_dir / "local"),
                "--api-port",
                str(self.api_port),
                "--mesos-port",
                str(self.mesos_port),
                "--cpus",
                "16",
                "--mem",
                "32768",
                "--gpu-mem",
                str(SHARE_GPU_MEM_MIB),
            ],
        )

    def _inject(self, target: str, outage_s: float) -> str:
        if target != "local":
            raise ValueError(f"target {target!r} is not one of {self.targets}")
        pid = self.process.pid
        procs.kill(pid)
        self.process.wait()
        time.sleep(outage_s)
        self.start()
        return f"SIGKILL dlc local pid {pid}, restarted after {outage_s:.1f}s"

    def stop(self) -> None:
        if self.process is not None:
            procs.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                procs.kill(self.process.pid)
        self.kill_run_processes()


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        time.sleep(0.05)


CLUSTERS = {"real": RealCluster, "local": LocalCluster}
