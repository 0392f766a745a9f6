"""Launch-overhead benchmark: `dlc submit` -> container running, versus a plain `docker run`.

Both paths start the same image with the same command on the same Docker engine, interleaved in
one run (so engine warm-up and machine load hit both alike). The moment a container is running
is the engine's own ``start`` event (read from ``docker events``), so both sides are timed by one
clock:

* DLC: from sending the submit request to the scheduler's HTTP API (in-process client, as
  `dlc submit` does after Python start-up) to the job container's ``start`` event. This covers
  the queue, the Mesos offer cycle, the executor process start-up (Python, pymesos, docker SDK),
  LaunchSpec decoding, the image check, GPU rendering and container create+start.
* docker: from spawning ``docker run -d`` to that container's ``start`` event.

    python bench/launch.py                       # real Mesos 1.11 (scripts/mesos-local.sh)
    python bench/launch.py --master emulator     # DLC's in-process Mesos emulator
    python bench/launch.py --runs 10 --json out.json

Needs the Docker engine and the test image (``bash scripts/docker.sh start``). The job asks for
one GPU and runs with the legacy GPU style on stand-in ``/dev/nvidia*`` nodes (this machine has
no GPU), so the GPU rendering is part of what is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlc.executor.runtime import DockerRuntime  # noqa: E402

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = "cpus:8;mem:8192;disk:10240;gpus:4;gpu_ids:{0,1,2,3}"
TOKEN = "bench-launch-token"


class StartEvents:
    """Engine ``start`` events (container id -> arrival time), read on a thread."""

    def __init__(self, runtime: DockerRuntime):
        self._stream = runtime.client.api.events(decode=True, filters={"event": "start"})
        self._seen: dict[str, float] = {}
        self._labels: dict[str, dict] = {}
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closes when the benchmark ends
            for event in self._stream:
                self._queue.put(
                    (event["id"], event["timeNano"] / 1e9, event["Actor"]["Attributes"])
                )

    def wait(self, match, timeout=120.0) -> tuple[str, float]:
        """The first start event whose attributes satisfy ``match``: (container id, time)."""
        deadline = time.time() + timeout
        for cid, when in self._seen.items():
            if match(cid, self._labels[cid]):
                return cid, when
        while time.time() < deadline:
            try:
                cid, when, attrs = self._queue.get(timeout=deadline - time.time())
            except queue.Empty:
                break
            self._seen[cid], self._labels[cid] = when, attrs
            if match(cid, attrs):
                return cid, when
        raise TimeoutError("no container start event in time")

    def close(self) -> None:
        self._stream.close()


def fake_gpu_host(runtime: DockerRuntime, work: Path) -> tuple[Path, str, str]:
    """Stand-in device nodes and a driver volume for the legacy GPU style."""
    dev = work / "dev"
    dev.mkdir()
    nodes = {"nvidiactl": (195, 255), "nvidia-uvm": (510, 0), "nvidia-uvm-tools": (510, 1)}
    nodes.update({f"nvidia{m}": (195, m) for m in range(4)})
    for name, (major, minor) in nodes.items():
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    version = f"999.{uuid.uuid4().hex[:4]}"
    volume = f"nvidia_driver_{version}"
    runtime.client.volumes.create(volume)
    return dev, version, volume


@contextlib.contextmanager
def mesos_master(kind: str, work: Path):
    """Yields (master address, sandbox roots) for the real Mesos or the emulator."""
    if kind == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        with MesosEmulator(agents=[AgentSpec(resources=RESOURCES)], work_dir=work) as emulator:
            yield emulator.address, (str(work),)
        return
    env = dict(os.environ, MESOS_RESOURCES=RESOURCES)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    script = str(ROOT / "scripts" / "mesos-local.sh")
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", script, "build"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        ["bash", script, "start", "", str(work)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    try:
        yield out.split()[0], ()
    finally:
        subprocess.run(["bash", script, "stop", str(work)], env=env, capture_output=True)


def dlc_launch(service, events: StartEvents) -> float:
    """Seconds from the submit request to the job container's start event."""
    from click.testing import CliRunner

    from dlc.cli.main import cli

    env = {"DLC_API": service.api_url, "DLC_TOKEN": TOKEN}
    argv = ["submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5", "--mem", "128M", "--"]
    sent = time.time()
    result = CliRunner().invoke(cli, [*argv, "true"], env=env)
    if result.exit_code != 0:
        raise RuntimeError(f"submit failed: {result.output}")
    job_id = result.output.split()[0]
    _, started = events.wait(lambda _cid, attrs: attrs.get("dlc.job") == job_id)
    wait_job_done(service, job_id)
    return started - sent


def wait_job_done(service, job_id: str, timeout=60.0) -> None:
    """Wait for the job to end so the next run finds the GPUs free again."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if service.store.get_job(job_id).state.value in ("finished", "failed", "lost", "killed"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} did not end")


def docker_launch(events: StartEvents) -> float:
    """Seconds from spawning `docker run -d` to its container's start event."""
    name = f"bench-plain-{uuid.uuid4().hex[:8]}"
    sent = time.time()
    cid = subprocess.run(
        ["docker", "run", "-d", "--name", name, "--cpus", "0.5", "-m", "128m", IMAGE, "true"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    _, started = events.wait(lambda c, _attrs: c == cid)
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    return started - sent


def summarize(samples: list[float]) -> dict:
    return {
        "runs": len(samples),
        "median_s": statistics.median(samples),
        "mean_s": statistics.fmean(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "samples_s": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", choices=["real", "emulator"], default="real")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig

    runtime = DockerRuntime()
    if runtime.image_env(IMAGE) is None:
        sys.exit(f"{IMAGE} missing: run `bash scripts/docker.sh start`")
    work = Path(tempfile.mkdtemp(prefix="dlc-bench-launch-"))
    dev, version, volume = fake_gpu_host(runtime, work)
    events = StartEvents(runtime)
    dlc_s, docker_s = [], []
    try:
        with mesos_master(args.master, work / "mesos") as (address, roots):
            command = (
                f"{sys.executable} -m dlc executor --gpu-style legacy --device-root {dev} "
                f"--driver-version {version} --no-reaper"
            )
            service = SchedulerService(
                ServiceConfig(
                    master=address,
                    db=str(work / "db"),
                    api_port=0,
                    sandbox_roots=roots,
                    executor=ExecutorConfig(command=command),
                    admin_token=TOKEN,
                )
            )
            service.start()
            try:
                if not service.framework.registered.wait(30):
                    sys.exit("the scheduler did not register with the master")
                docker_launch(events)  # warm-up of the engine and the image, not counted
                for _ in range(args.runs):
                    dlc_s.append(dlc_launch(service, events))
                    docker_s.append(docker_launch(events))
            finally:
                service.stop()
    finally:
        events.close()
        for container in runtime.client.api.containers(all=True, filters={"volume": volume}):
            runtime.remove(container["Id"])
        runtime.client.volumes.get(volume).remove(force=True)
        shutil.rmtree(work, ignore_errors=True)

    report = {
        "master": args.master,
        "image": IMAGE,
        "dlc_submit_to_running": summarize(dlc_s),
        "docker_run_to_running": summarize(docker_s),
    }
    report["overhead_median_s"] = report["dlc_submit_to_running"]["median_s"] - statistics.median(
        docker_s
    )
    report["ratio_median"] = report["dlc_submit_to_running"]["median_s"] / statistics.median(
        docker_s
    )
    print(f"launch overhead ({args.runs} runs each, interleaved; master: {args.master})")
    print(f"{'path':<28}{'median s':>10}{'min s':>8}{'max s':>8}")
    for label, key in (
        ("dlc submit -> running", "dlc_submit_to_running"),
        ("docker run -> running", "docker_run_to_running"),
    ):
        row = report[key]
        print(f"{label:<28}{row['median_s']:>10.3f}{row['min_s']:>8.3f}{row['max_s']:>8.3f}")
    print(
        f"DLC adds {report['overhead_median_s']:.3f} s (median); "
        f"ratio {report['ratio_median']:.1f}x a plain docker run"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
