"""A notebook on a share of a GPU, and `dlc shell` on a real terminal, on BOTH masters.

`dlc local` (its own composition: emulator agent from `dlc node-config` of a simulated DGX-1
with `--gpu-mem`) and the REAL Mesos master (an agent with the share ranges), each with the real
Docker engine and `dlc executor`:

* `dlc submit --interactive --gpus 0.5 --gpu-memory 4G`: one command; the URL `dlc open` prints
  answers, wants its token, the container sees its share (`DLC_GPU_MEMORY_MIB=4096`,
  `DLC_GPU_CORE_MILLI=500`), another user gets nothing, and idle stop ends it;
* `dlc shell JOB` under a pseudo-terminal (the CLI's raw mode, size and SIGWINCH for real):
  typed commands run in the container, the remote terminal has the local size and follows a
  resize, Ctrl-C reaches the container, the remote exit code comes back and the local terminal
  is restored;
* the per-user session cap (`--max-sessions-per-user 1` here): while the shell is open, the
  same user's `dlc exec` is refused in one line, and works again once the shell ended.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from dlc.api.shell_relay import SessionLimits
from tests.e2e.test_environments import _shell, _status, env_image  # noqa: F401 (fixture)
from tests.e2e.test_workdir_outputs import _cli, _wait

pytestmark = [pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
SHARE_RESOURCES = (
    "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:2;gpu_ids:{0,1};"
    "gpu_mem:[0-32767,1048576-1081343];gpu_core:[0-999,1048576-1049575]"
)
LIMITS = SessionLimits(per_user=1, total=8)
EXECUTOR = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"


class Service:
    """What the test needs of either master: the API URL and a way to add tokens."""

    def __init__(self, api_url: str, store) -> None:
        self.api_url, self.store = api_url, store


def _local(work: Path):
    from dlc.app.local import LocalCluster, LocalConfig

    config = LocalConfig(simulate=str(DGX1), work_dir=str(work), api_port=0,
                         gpu_mem_mib=32768, executor_command=EXECUTOR, sessions=LIMITS)  # fmt: skip
    cluster = LocalCluster(config).start()
    return cluster.service, cluster.stop


def _real(work: Path):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig
    from tests.real_mesos import RealMesos, ensure_built, venv_env

    env = venv_env(MESOS_RESOURCES=SHARE_RESOURCES, MESOS_ATTRIBUTES="dlc_sharing:none")
    ensure_built(env)
    mesos = RealMesos(work / "mesos", env)
    address = mesos.start()
    svc = SchedulerService(
        ServiceConfig(master=address, db=str(work / "db"), api_port=0, sessions=LIMITS,
                      executor=ExecutorConfig(command=EXECUTOR), admin_token="share-env-admin")
    )  # fmt: skip
    svc.start()
    assert svc.framework.registered.wait(30), "framework did not register"

    def stop() -> None:
        svc.stop()
        mesos.stop()

    return svc, stop


@pytest.fixture(scope="module", params=["local", pytest.param("real", marks=pytest.mark.mesos)])
def service(request, tmp_path_factory):
    from dlc.errors import ContainerError
    from dlc.executor.container_spec import LABEL_FRAMEWORK
    from dlc.executor.runtime import DockerRuntime

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    work = tmp_path_factory.mktemp(request.param)
    svc, stop = (_local if request.param == "local" else _real)(work)
    framework_id = svc.core.framework_id
    try:
        yield svc
    finally:
        stop()
        runtime.remove_all(runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)


class PtyShell:
    """`dlc shell JOB` with a pseudo-terminal as its controlling terminal."""

    def __init__(self, svc, token: str, job_id: str, rows: int, cols: int) -> None:
        self.master, self.slave = os.openpty()
        self.resize(rows, cols)
        self.saved = termios.tcgetattr(self.slave)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(DLC_API=svc.api_url, DLC_TOKEN=token, TERM="xterm")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlc", "shell", job_id], stdin=self.slave,
            stdout=self.slave, stderr=self.slave, env=env, preexec_fn=self._take_terminal,
        )  # fmt: skip
        self.seen = b""

    def _take_terminal(self) -> None:  # in the child: a session whose terminal is the pty
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    def resize(self, rows: int, cols: int) -> None:
        """Like a terminal window resized: the kernel sends SIGWINCH to the foreground."""
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def expect(self, marker: bytes, timeout: float = 20) -> bytes:
        """Read until ``marker`` shows (what came before it is returned)."""
        deadline = time.monotonic() + timeout
        while marker not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not self._readable(0):
                raise AssertionError(f"no {marker!r} in {self.seen[-600:]!r}")
            if self._readable(min(left, 0.5)):
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    break
                # busybox ash asks the terminal where the cursor is; answer like one
                for _ in range(chunk.count(b"\x1b[6n")):
                    os.write(self.master, b"\x1b[1;1R")
                self.seen += chunk
        before, _, self.seen = self.seen.partition(marker)
        return before

    def _readable(self, timeout: float) -> bool:
        return bool(select.select([self.master], [], [], timeout)[0])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)
        os.close(self.slave)


def _wait_size(shell: PtyShell, rows: int, cols: int) -> None:
    """``stty size`` in the container says ``rows cols`` (a resize travels asynchronously)."""
    for attempt in range(10):
        shell.type(f"echo sz$((0+{attempt})); stty size; echo zs$((0+{attempt}))\r")
        shell.expect(f"sz{attempt}".encode())
        if f"{rows} {cols}".encode() in shell.expect(f"zs{attempt}".encode()):
            return
        time.sleep(0.3)
    raise AssertionError(f"the remote terminal never became {rows}x{cols}")


def _pty_session(svc, alice: str, job_id: str, touch) -> None:
    """``touch()`` keeps the lab busy (a shell is not the lab's activity; idle stop is on)."""
    shell = PtyShell(svc, alice, job_id, rows=33, cols=101)
    try:
        shell.expect(b"$ ")  # the remote prompt: raw mode is on by now
        shell.type("echo ready$((6*7))\r")
        shell.expect(b"ready42")  # computed remotely: the echo of the typed line says 6*7
        _wait_size(shell, 33, 101)  # the local size at the start
        # while this shell is open, alice's exec is over her cap of 1 session
        refused = _cli(svc, alice, "exec", job_id, "--", "true")
        assert refused.exit_code == 1, refused.output
        assert "--max-sessions-per-user 1" in refused.output
        assert len(refused.output.strip().splitlines()) == 1
        second = _shell(svc, alice, job_id, b"echo no\n")  # a second shell: the same cap
        assert second.returncode == 1 and "--max-sessions-per-user 1" in second.stderr.decode()
        touch()
        shell.resize(40, 120)
        _wait_size(shell, 40, 120)  # SIGWINCH -> resize message -> the exec's TTY
        touch()
        shell.type("sleep 30\r")
        time.sleep(0.5)
        shell.type("\x03")  # raw mode: Ctrl-C goes to the container, not to dlc shell
        shell.type("echo after$((1+1))\r")
        shell.expect(b"after2", timeout=15)  # long before the sleep would have ended
        assert shell.proc.poll() is None
        shell.type("exit 5\r")
        assert shell.proc.wait(20) == 5
        assert termios.tcgetattr(shell.slave) == shell.saved  # the terminal is back as it was
    finally:
        shell.close()


def test_a_notebook_on_a_gpu_share_and_a_real_terminal_in_it(service, env_image):  # noqa: F811
    alice = service.store.add_token("share-alice")
    bob = service.store.add_token("share-bob")
    submitted = _cli(service, alice, "submit", "--image", env_image, "--interactive",
                     "--gpus", "0.5", "--gpu-memory", "4G", "--idle-timeout", "15",
                     "--cpus", "0.5", "--mem", "128M")  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    opened = _cli(service, alice, "open", job_id, "--wait", "60")
    assert opened.exit_code == 0, (opened.output, service.store.get_job(job_id).message)
    url = opened.output.strip().splitlines()[-1]
    assert _status(url) == (200, "hello from the lab")
    assert _status(url.split("?")[0])[0] == 403  # the secret is required
    job = service.store.get_job(job_id)
    (task,) = job.tasks
    assert task.gpu_ids == () or not task.gpu_ids  # a share, not a whole GPU

    share = _cli(service, alice, "exec", job_id, "--", "sh", "-c",
                 "echo mem=$DLC_GPU_MEMORY_MIB core=$DLC_GPU_CORE_MILLI")  # fmt: skip
    assert share.exit_code == 0, share.output
    assert "mem=4096 core=500" in share.output
    for args in (("open", job_id, "--wait", "0"), ("exec", job_id, "--", "true")):
        stranger = _cli(service, bob, *args)
        assert stranger.exit_code != 0 and "no job" in stranger.output.lower()

    _pty_session(service, alice, job_id, lambda: _status(url))
    again = _cli(service, alice, "exec", job_id, "--", "true")
    assert again.exit_code == 0, again.output  # the shell's session slot was given back

    done = _wait(service, job_id, timeout=90)  # nothing touches the lab now: idle stop
    assert done.state.value == "finished", done.message
    assert "stopped: idle for" in done.message


def _readme_lines() -> dict[str, list[str]]:
    """The README's laptop `dlc local` line and its environment example, as written."""
    import shlex

    lines = (ROOT / "README.md").read_text().splitlines()

    def find(text: str) -> list[str]:
        line = next(x for x in lines if text in x)
        return shlex.split(line.split(" # ")[0].strip())[1:]  # without `dlc` and the comment

    return {"local": find("dlc local --simulate"), "submit": find("--workdir examples/lab"),
            "open": find("dlc open <job>"), "exec": find("dlc exec <job> --")}  # fmt: skip


def test_the_readme_environment_example_runs_as_written(service, monkeypatch):
    readme = _readme_lines()
    # the `dlc local` the README starts is the one the `local` fixture builds
    assert readme["local"] == ["local", "--simulate", "examples/topologies/dgx1-v100.txt",
                               "--gpu-mem", "32768"]  # fmt: skip
    monkeypatch.chdir(ROOT)  # the README runs from the checkout
    token = service.store.add_token("readme-user")
    submitted = _cli(service, token, *readme["submit"])
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.split()[0]
    try:
        opened = _cli(service, token, *[job_id if a == "<job>" else a for a in readme["open"]])
        assert opened.exit_code == 0, opened.output
        url = opened.output.strip().splitlines()[-1]
        status, body = _status(url)
        assert status == 200 and "GPU share 4096 MiB, code in /workspace" in body
        ran = _cli(service, token, *[job_id if a == "<job>" else a for a in readme["exec"]])
        assert ran.exit_code == 0 and ran.output.strip() == "4096", ran.output
        # a command longer than an API call's usual 10 s still gets its answer
        slow = _cli(service, token, "exec", job_id, "--", "sh", "-c", "sleep 11; echo slow")
        assert slow.exit_code == 0 and slow.output == "slow\n", slow.output
    finally:
        _cli(service, token, "kill", job_id)
