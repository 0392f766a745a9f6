"""DLC on three hosts, installed from `make dist` by following docs/install.md, then used.

Hosts are network namespaces on a private bridge (tests/multihost/netns.py): the master host
(the real Mesos 1.11 master and two agents of ../shared/mesos-local, at 198.51.100.2), the
scheduler host (`dlc scheduler` started from the installed unit, at 198.51.100.3; the master
host's sandboxes hidden from it by a tmpfs, as on a real cluster) and the user host (only the
`dlc` command, at 198.51.100.4). All three run the one venv the guide installs from `dist/`
(hosts share this machine's file system). DLC and http-parser come from `dist/` only; the
third-party packages come from the test's own venv through a .pth file, so the install runs
offline. Containers run on the root namespace's Docker engine: the executor in the master host
reaches it through its unix socket, which network namespaces do not separate.

The scheduler binds 0.0.0.0 and advertises http://198.51.100.3:8642 (`--api-advertise-url`):
executors must fetch `--workdir` snapshots at the advertised address, and the master must
show it as the framework's web UI. The guide's tagged blocks are run as written
(tests/multihost/guide.py), then the README's workflow from the user host: `--workdir`,
`logs -f`, `cp` of a 10 MiB random file (checksums equal), `open`, `exec`, `shell` on a pty,
a 2-node gang (logs of both ranks) and `kill`. Each host has its own 127.0.0.1, so a path that
reaches another host at loopback fails; the test also checks that nothing advertises 0.0.0.0
or 127.x to the other hosts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.multihost import guide
from tests.multihost.netns import Network
from tests.real_mesos import ensure_built, venv_env

pytestmark = [pytest.mark.docker, pytest.mark.mesos, pytest.mark.multihost]

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
ENV_IMAGE = "dlc-test/envhttp:1"  # answers like JupyterLab (tests/e2e/envhttp)
MASTER_PORT = 5050
API_PORT = 8642
RESOURCES = "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:2;gpu_ids:{0,1}"
#: `dlc submit` of a small busybox job (no GPU style on these hosts: no GPUs)
SUBMIT = ("submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5", "--mem", "64M")
SITE = Path(sys.executable).parents[1] / "lib" / "python3.11" / "site-packages"
#: what the guide's install must bring from dist/ itself, not from the test's venv
FROM_DIST = ("dlc", "dlc-", "__editable__", "http_parser", "__pycache__")


def third_party(root: Path) -> str:
    """A folder of links to the test venv's packages except DLC and http-parser: a new venv
    gets it through a .pth file, so pip installs only those two, from dist/, offline."""
    deps = root / "deps"
    deps.mkdir()
    for entry in SITE.iterdir():
        if not entry.name.startswith(FROM_DIST) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    return str(deps)


class Cluster:
    """The running hosts and how to run commands on them."""

    def __init__(self, root: Path, net: Network):
        self.root = root
        self.net = net
        self.procs: list[subprocess.Popen] = []
        self.mesos_run = root / "mesos"
        self.api_url = ""
        self.deps = third_party(root)

    def env(self, home: str, **extra: str) -> dict[str, str]:
        """A host's clean environment: the guide's /usr/local/bin first, its own HOME."""
        path = f"{self.root}/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        home_dir = self.root / "home" / home
        home_dir.mkdir(parents=True, exist_ok=True)
        return {"PATH": path, "HOME": str(home_dir), "LANG": "C.UTF-8",
                "DLC_SETUP_UNIT_DIR": f"{self.root}/etc/systemd/system",
                "DLC_SETUP_ETC_DIR": f"{self.root}/etc/dlc", **extra}  # fmt: skip

    def run(
        self, role: str, argv: list[str], timeout: float = 120, **kw
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` on host ``role`` (a namespace), capturing its output."""
        env = kw.pop("env", None) or self.env(role)
        kw.setdefault("cwd", env["HOME"])  # never the checkout: `python -c` imports from cwd
        ns = self.net.hosts[role].ns
        return subprocess.run(["ip", "netns", "exec", ns, *argv], env=env, capture_output=True,
                              timeout=timeout, **kw)  # fmt: skip

    def dlc(self, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """``dlc ARGS`` on the user host (text output)."""
        return self.run("user", ["dlc", *args], timeout=timeout, text=True, **kw)

    def guide_block(self, host: str, role: str, cwd: Path, **extra: str) -> str:
        """Run the guide's ``dlc-test:host`` block on ``role``; its stdout."""
        script = guide.script(guide.block(host), self.root, self.deps)
        proc = self.run(role, ["bash", "-c", script], env=self.env(role, **extra), cwd=cwd,
                        text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, f"guide block {host}:\n{script}\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def wait_http(self, role: str, url: str, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.run(role, ["curl", "-sf", "-o", "/dev/null", url], timeout=10).returncode == 0:
                return
            time.sleep(0.3)
        raise AssertionError(f"{url} does not answer from the {role} host")

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if (self.mesos_run / "host.pid").exists():
            subprocess.run(["bash", str(guide.ROOT / "scripts" / "mesos-local.sh"), "stop",
                            str(self.mesos_run)], capture_output=True, check=False)  # fmt: skip
        self.net.close()


def _phase(name: str, started: list[float]) -> None:
    """Print how long each phase of the set-up took (pytest -s shows it)."""
    now = time.monotonic()
    print(f"multihost: {name} {now - started[-1]:.1f} s")
    started.append(now)


def _start_master(cluster: Cluster) -> None:
    master = cluster.net.hosts["master"]
    env = venv_env(MESOS_RESOURCES=RESOURCES, MESOS_NUM_SLAVES="2", HOST_IP=master.ip,
                   VENV=str(cluster.root / "opt" / "dlc" / "venv"))  # fmt: skip
    ensure_built(env)
    env.pop("PATH")
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    script = str(guide.ROOT / "scripts" / "mesos-local.sh")
    cluster.mesos_run.mkdir()
    proc = subprocess.run(["ip", "netns", "exec", master.ns, "bash", script, "start",
                           str(MASTER_PORT), str(cluster.mesos_run)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def _start_scheduler(cluster: Cluster) -> None:
    """The installed unit's ExecStart with the edited settings file, as systemd would run it."""
    master, sched = cluster.net.hosts["master"], cluster.net.hosts["scheduler"]
    cluster.api_url = f"http://{sched.ip}:{API_PORT}"
    settings = guide.env_file(
        cluster.root / "etc" / "dlc" / "scheduler.env",
        DLC_MASTER=f"{master.ip}:{MASTER_PORT}",
        DLC_API_HOST="0.0.0.0",  # noqa: S104 - bound everywhere, advertised at one address
        DLC_API_ADVERTISE_URL=cluster.api_url,
        DLC_SCHEDULER_ARGS="--executor-gpu-style none",
    )
    unit = cluster.root / "etc" / "systemd" / "system" / "dlc-scheduler.service"
    argv = [guide.relocate(word, cluster.root) for word in guide.exec_start(unit)]
    hide = 'mount -t tmpfs tmpfs "$1" && shift && exec "$@"'  # the master host's files
    log = (cluster.root / "scheduler.log").open("w")
    cluster.procs.append(subprocess.Popen(
        ["ip", "netns", "exec", sched.ns, "unshare", "--mount", "--propagation", "private",
         "sh", "-c", hide, "sh", str(cluster.mesos_run), *argv],
        env=cluster.env("scheduler", **settings), stdout=log, stderr=subprocess.STDOUT,
    ))  # fmt: skip
    cluster.wait_http("user", f"{cluster.api_url}/v1/health", 60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the multi-host test makes network namespaces: run it as root (CI is)",
                    pytrace=False)  # fmt: skip
    root = tmp_path_factory.mktemp("hosts")
    for folder in ("usr/local/bin", "etc/systemd/system", "var/lib", "opt"):  # as on any host
        (root / folder).mkdir(parents=True)
    net = Network().open()
    cluster = Cluster(root, net)
    try:
        net.add("master", 2)
        net.add("scheduler", 3)
        net.add("user", 4)
        clock = [time.monotonic()]
        build = guide.script(guide.block("build"), root, cluster.deps)  # on this machine: it may
        subprocess.run(["bash", "-c", build], cwd=guide.ROOT, check=True,  # need the index
                       capture_output=True, timeout=300)  # fmt: skip
        _phase("make dist", clock)
        cluster.guide_block("every-host", "user", guide.ROOT)
        _phase("install", clock)
        _start_master(cluster)
        _phase("master", clock)
        cluster.guide_block("scheduler", "scheduler", root)
        _start_scheduler(cluster)
        _phase("scheduler", clock)
        tokens = cluster.guide_block("scheduler-running", "scheduler", root)
        token = tokens.splitlines()[0].strip()
        (root / "home" / "user").mkdir(parents=True, exist_ok=True)
        (root / "home" / "user" / ".dlc-token").write_text(token + "\n")
        cluster.guide_block("user", "user", root, DLC_API_URL=cluster.api_url, DLC_IMAGE=IMAGE)
        _phase("first job", clock)
        yield cluster
    except BaseException:
        log = root / "scheduler.log"
        if log.exists():
            print("scheduler log:\n" + log.read_text()[-4000:])
        raise
    finally:
        cluster.close()


def _job_id(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.split()[0]


def _wait_state(cluster: Cluster, job_id: str, states: set[str], timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = cluster.dlc("status", job_id, "-o", "json")
        job = json.loads(shown.stdout) if shown.returncode == 0 else {}
        if job.get("state") in states:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} never reached {states}: {shown.stdout}{shown.stderr}")


def _shell_on_a_pty(cluster: Cluster, job_id: str, typed: bytes) -> tuple[int, bytes]:
    """`dlc shell JOB` on a terminal of its own (a pty), as a user types into it."""
    import pty
    import select

    leader, follower = pty.openpty()
    env = cluster.env("user")
    proc = subprocess.Popen(["ip", "netns", "exec", cluster.net.hosts["user"].ns, "dlc",
                             "shell", job_id], stdin=follower, stdout=follower,
                            stderr=follower, env=env, cwd=env["HOME"])  # fmt: skip
    os.close(follower)
    output, typed_at, deadline = b"", None, time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last user closed it
                break
            output += data
            if typed_at is None:  # the remote prompt is there: type (raw mode flushed
                os.write(leader, typed)  # whatever came before it)
                typed_at = len(output)
        elif proc.poll() is not None:
            break
    os.close(leader)
    try:
        return proc.wait(timeout=10), output
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"dlc shell did not end; the terminal showed {output!r}") from None


def test_the_installed_command_is_the_wheel_not_a_checkout(cluster):
    where = cluster.run("user", ["python3", "-c", "print(1)"], text=True)
    assert where.returncode == 0
    venv_python = str(cluster.root / "opt" / "dlc" / "venv" / "bin" / "python")
    proc = cluster.run("user", [venv_python, "-c", "import dlc; print(dlc.__file__)"], text=True)
    assert proc.stdout.startswith(str(cluster.root / "opt" / "dlc" / "venv")), proc.stdout
    assert (cluster.root / "opt/dlc/venv/share/dlc/docs/install.md").is_file()


def test_workdir_logs_and_a_10_mib_binary_copy_across_hosts(cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").write_text(
        "echo from the snapshot; head -c 10485760 /dev/urandom > /outputs/ckpt.bin; "
        "sha256sum /outputs/ckpt.bin\n"
    )
    job_id = _job_id(cluster.dlc(*SUBMIT, "--workdir", str(code), "--", "sh", "run.sh"))
    logs = cluster.dlc("logs", "-f", job_id, timeout=120)
    assert logs.returncode == 0, logs.stderr
    assert "from the snapshot" in logs.stdout, cluster.dlc(
        "status", job_id
    ).stdout  # fetched from the advertised API URL
    want = re.search(r"([0-9a-f]{64})\s+/outputs/ckpt.bin", logs.stdout)
    assert want, logs.stdout
    assert _wait_state(cluster, job_id, {"finished", "failed"})["state"] == "finished"
    dest = tmp_path / "ckpt.bin"
    copied = cluster.dlc("cp", f"{job_id}:ckpt.bin", str(dest), timeout=180)
    assert copied.returncode == 0, copied.stderr
    assert dest.stat().st_size == 10 * 1024 * 1024
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == want[1]


def test_exec_shell_and_kill_of_a_running_job(cluster):
    job_id = _job_id(cluster.dlc(*SUBMIT, "--", "sleep", "600"))
    _wait_state(cluster, job_id, {"running"})
    deadline = time.monotonic() + 60
    while True:  # the executor's exec server comes up just after the container
        done = cluster.dlc("exec", job_id, "--", "sh", "-c", "echo $((6*7))")
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
    code, output = _shell_on_a_pty(cluster, job_id, b"echo h$((40+2))i; exit 3\r")
    assert code == 3, output
    assert b"h42i" in output  # computed in the container: the typed line reads h$((40+2))i
    killed = cluster.dlc("kill", job_id)
    assert killed.returncode == 0, killed.stderr
    assert _wait_state(cluster, job_id, {"killed", "failed", "finished"})["state"] == "killed"


def test_open_prints_the_agents_url_and_the_lab_answers(cluster):
    """`dlc open` from the user host: a URL at the master host's address (never 127.x or
    0.0.0.0) and a port of the agent's range. The container's port is published by the
    engine of the root namespace (the one engine these hosts share), so the lab is asked
    there, at loopback; on a real cluster each agent host runs its own engine and the URL
    answers at the agent's address (tests/e2e/test_environments.py covers the server)."""
    import docker

    docker.from_env().images.build(path=str(guide.ROOT / "tests" / "e2e" / "envhttp"),
                                   tag=ENV_IMAGE, rm=True)  # fmt: skip
    submitted = cluster.dlc("submit", "--image", ENV_IMAGE, "--interactive", "--idle-timeout",
                            "600", *SUBMIT[3:])  # fmt: skip
    job_id = _job_id(submitted)
    opened = cluster.dlc("open", job_id, "--wait", "60")
    assert opened.returncode == 0, opened.stderr
    url = opened.stdout.strip()
    match = re.fullmatch(r"http://([\d.]+):(\d+)/lab\?token=\w+", url)
    assert match and match[1] == cluster.net.hosts["master"].ip, url
    assert 31000 <= int(match[2]) <= 31100
    local = url.replace(match[1], "127.0.0.1", 1)
    with urllib.request.urlopen(local, timeout=10) as resp:
        assert resp.read().decode().strip() == "hello from the lab"
    assert cluster.dlc("kill", job_id).returncode == 0


def test_a_two_node_gang_runs_on_both_agents(cluster):
    echo = "echo rank $NODE_RANK of $WORLD_SIZE at $MASTER_ADDR"
    job_id = _job_id(cluster.dlc(*SUBMIT, "--nodes", "2", "--", "sh", "-c", echo))
    assert _wait_state(cluster, job_id, {"finished", "failed", "killed"})["state"] == "finished"
    master_ip = cluster.net.hosts["master"].ip
    for rank in (0, 1):
        logs = cluster.dlc("logs", job_id, "--rank", str(rank))
        assert f"rank {rank} of 2 at {master_ip}" in logs.stdout, logs.stdout + logs.stderr


def test_no_host_advertises_loopback_or_no_address(cluster):
    master = cluster.net.hosts["master"]
    state = cluster.run("scheduler", ["curl", "-sf", f"http://{master.ip}:{MASTER_PORT}/master/state"],
                        text=True)  # fmt: skip
    assert state.returncode == 0
    body = json.loads(state.stdout)
    frameworks = [f for f in body["frameworks"] if f["name"].lower().startswith("dlc")]
    assert frameworks and all(f["webui_url"] == cluster.api_url + "/" for f in frameworks)
    assert {a["hostname"] for a in body["slaves"]} == {master.ip}
    for text in (json.dumps(body), (cluster.root / "scheduler.log").read_text()):
        assert "0.0.0.0:" not in text  # noqa: S104 - what no host may advertise
        assert not re.search(r"127\.\d+\.\d+\.\d+:\d", text), "a loopback address was handed out"
