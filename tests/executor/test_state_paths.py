"""No job volume reaches DLC's own state on the agent, whatever ``--allow-volume`` says.

Red-team finding of session 13: with ``--allow-volume /run`` a job could mount
``/run/dlc-mps/...``, the pipe directories of the MPS daemons other tenants' shares run under.
Stand-in state folders under ``tmp_path`` play the agent's ``/run``; the real ``/run``, ``/``
and ``/etc`` are checked too (the refusal reads them, mounts nothing).
"""

from __future__ import annotations

import os

import pytest

from dlc.app.local import LocalConfig, pool_specs, with_state_dir
from dlc.executor.host_paths import MountRefused, check_volume, checked_spec
from dlc.executor.kernel_fs import kernel_filesystem
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.mps import MpsManager
from dlc.executor.state_paths import (
    STATE_DIRS_VARIABLE,
    StatePath,
    agent_work_dir,
    default_state_paths,
    prefix_warning,
    prefix_warnings,
    resolve,
    runner_state_paths,
)
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume
from dlc.scheduler.jobs.spec_rules import state_overlap
from tests.app.test_local import DGX1

from .fake_runtime import FakeRuntime
from .test_task_runner import data, make

FIX = "mount a directory that does not hold DLC's state"


@pytest.fixture
def run(tmp_path):
    """A stand-in ``/run`` holding ``dlc-mps/gpu0/pipe`` and a job's own ``jobs/d``."""
    root = tmp_path.resolve() / "run"
    (root / "dlc-mps" / "gpu0" / "pipe").mkdir(parents=True)
    (root / "jobs" / "d").mkdir(parents=True)
    return root


def _refusal(volume: str, allowed: str, state) -> str:
    spec = LaunchSpec(
        job_id="j",
        image="busybox:1",
        volumes=(Volume(volume, "/x"),),
        policy=TaskPolicy(allowed_volumes=(allowed,)),
    )
    with pytest.raises(MountRefused) as err:
        checked_spec(spec, state)
    text = str(err.value)
    assert "\n" not in text and text.endswith(FIX)
    return text


def test_a_volume_that_contains_the_mps_pipes_is_refused_under_an_allowed_prefix(run):
    state = (StatePath(str(run / "dlc-mps"), "DLC's MPS pipes"),)
    text = _refusal(str(run), str(run), state)
    assert text.startswith(f"volume {run}:/x: it contains DLC's MPS pipes {run}/dlc-mps;")


def test_a_volume_inside_the_mps_pipes_is_refused(run):
    state = (StatePath(str(run / "dlc-mps"), "DLC's MPS pipes"),)
    text = _refusal(f"{run}/dlc-mps/gpu0/pipe", str(run), state)
    assert f"it lies inside DLC's MPS pipes {run}/dlc-mps;" in text
    assert "it is DLC's MPS pipes" in _refusal(f"{run}/dlc-mps", str(run), state)


def test_a_sibling_of_the_state_under_the_same_prefix_is_mounted(run):
    state = (StatePath(str(run / "dlc-mps"), "DLC's MPS pipes"),)
    spec = LaunchSpec(
        job_id="j",
        image="busybox:1",
        volumes=(Volume(f"{run}/jobs/d", "/x"),),
        policy=TaskPolicy(allowed_volumes=(str(run),)),
    )
    assert checked_spec(spec, state).volumes == (Volume(f"{run}/jobs/d", "/x"),)


def test_state_named_through_a_symlink_is_resolved_first(run, tmp_path):
    # as /var/run/dlc-mps is /run/dlc-mps where /var/run -> /run
    os.symlink(run, tmp_path / "varrun")
    state = (StatePath(str(tmp_path / "varrun" / "dlc-mps"), "DLC's MPS pipes"),)
    assert f"it contains DLC's MPS pipes {run}/dlc-mps" in _refusal(str(run), str(run), state)


def test_state_that_does_not_exist_yet_still_counts(run):
    # the MPS root appears with the first share, maybe while this job runs
    state = (StatePath(str(run / "dlc-shim"), "DLC's shim files"),)
    assert f"it contains DLC's shim files {run}/dlc-shim" in _refusal(str(run), str(run), state)


def test_another_name_of_a_state_directory_is_caught_by_its_inode(run, tmp_path):
    state = resolve([StatePath(str(run / "dlc-mps"), "DLC's MPS pipes")])
    alias = os.stat(run / "dlc-mps")
    holder = os.stat(run)
    root = os.stat("/")
    # as a bind mount of the folder would appear: a different path, the same inode
    same = state.problem("/srv/alias", [(root.st_dev, root.st_ino), (alias.st_dev, alias.st_ino)])
    assert same == f"it is DLC's MPS pipes {run}/dlc-mps (the same directory by another name)"
    above = state.problem("/srv/up", [(root.st_dev, root.st_ino), (holder.st_dev, holder.st_ino)])
    assert above.startswith(f"it contains DLC's MPS pipes {run}/dlc-mps")
    assert state.problem("/srv/other", [(root.st_dev, root.st_ino), (1, 2)]) is None


@pytest.mark.parametrize(
    ("volume", "allowed", "reason"),
    [
        ("/run", "/run", "it contains DLC's MPS pipes /run/dlc-mps"),
        ("/", "/", "it contains DLC's MPS pipes /run/dlc-mps"),
        ("/etc", "/", "it contains DLC's settings and keys /etc/dlc"),
        ("/tmp", "/", "it contains DLC's GPU claim lock /tmp/dlc-gpu-claim.lock"),
    ],
)
def test_the_real_system_trees_that_hold_dlc_state_are_refused(volume, allowed, reason):
    with pytest.raises(MountRefused) as err:
        check_volume(Volume(volume, "/x"), (allowed,))
    assert str(err.value) == f"volume {volume}:/x: {reason}; {FIX}"


def test_an_allowed_prefix_over_state_is_warned_of_naming_the_state_and_how_much(run):
    mps = StatePath(str(run / "dlc-mps"), "DLC's MPS pipes")
    state = resolve((mps, StatePath(str(run / "dlc-shim"), "DLC's shim files")))
    assert prefix_warning(f"{run}/", state) == (
        f"--allow-volume {run}/: it contains DLC's MPS pipes {run}/dlc-mps and 1 more of DLC's "
        f"state paths; job volumes that are, contain or lie inside them will be refused (the "
        f"rest of {run}/ stays allowed)"
    )
    # a prefix that is or lies inside state allows nothing at all
    assert prefix_warning(f"{run}/dlc-mps/gpu0", state) == (
        f"--allow-volume {run}/dlc-mps/gpu0: it lies inside DLC's MPS pipes {run}/dlc-mps; "
        "every job volume under it will be refused"
    )
    assert prefix_warning(f"{run}/dlc-shim", state).startswith(
        f"--allow-volume {run}/dlc-shim: it is DLC's shim files {run}/dlc-shim; every"
    )
    assert prefix_warning(f"{run}/jobs", state) is None  # beside the state: nothing to say


def test_the_real_run_is_warned_of_once_per_place_whatever_its_spellings():
    lines = prefix_warnings(["/run", "/data", "/var/run", "/"], env={})
    assert len(lines) == 3  # /data holds none of DLC's state
    run, var_run, root = lines
    assert run.startswith(
        "--allow-volume /run: it contains DLC's MPS pipes /run/dlc-mps and 5 more of DLC's "
        "state paths; job volumes"
    )  # /run/dlc-mps and /var/run/dlc-mps (where /var/run -> /run) count once
    assert var_run.startswith("--allow-volume /var/run: it contains DLC's MPS pipes")
    assert root.startswith("--allow-volume /: it contains DLC's MPS pipes /run/dlc-mps and ")


def test_every_default_is_covered_at_both_spellings():
    paths = {p.path for p in default_state_paths({})}
    for name in ("dlc-mps", "dlc-shim", "docker.sock", "docker", "containerd", "mesos"):
        assert {f"/run/{name}", f"/var/run/{name}"} <= paths
    assert {"/etc/dlc", "/var/lib/docker", "/var/lib/mesos", "/opt/dlc"} <= paths


def test_docker_host_socket_is_state():
    paths = default_state_paths({"DOCKER_HOST": "unix:///srv/engine/docker.sock"})
    assert StatePath("/srv/engine/docker.sock", "the Docker engine's socket") in paths
    assert state_overlap("/srv/engine", [(p.path, p.what) for p in paths]).startswith(
        "it contains the Docker engine's socket"
    )


def test_the_mesos_work_dir_is_found_above_a_sandbox():
    sandbox = "/var/lib/mesos/slaves/S0/frameworks/F/executors/E/runs/C"
    assert agent_work_dir(sandbox) == "/var/lib/mesos"
    assert agent_work_dir("/srv/box") is None
    assert agent_work_dir("/slaves/S0/frameworks/F/executors/E/runs/C") == "/"
    own = runner_state_paths("/srv/box", env={})[-1]
    assert own == StatePath("/srv/box", "this executor's sandbox")


def _mesos_sandbox(root, executor: str):
    box = root / "mesos" / "slaves" / "S0" / "frameworks" / "F" / "executors" / executor
    box = box / "runs" / "C"
    box.mkdir(parents=True)
    return box


def test_the_runner_refuses_another_tasks_sandbox_and_its_mps_root(tmp_path):
    root = tmp_path.resolve()
    other = _mesos_sandbox(root, "E2")  # another executor's sandbox: its output and secrets
    (root / "run" / "dlc-mps").mkdir(parents=True)
    (root / "data").mkdir()
    hook = ShareHook(mps=MpsManager(root=str(root / "run" / "dlc-mps")))
    runner, runtime, sink = make(_mesos_sandbox(root, "E1"), shares=hook)
    runner.pin_volumes = lambda spec, staging: (spec, lambda: None)  # no CAP_SYS_ADMIN here
    policy = TaskPolicy(allowed_volumes=(str(root),))
    for task, host in (("t1", other), ("t2", root / "run"), ("t3", root / "data")):
        runner.launch(task, data(volumes=(Volume(str(host), "/x"),), policy=policy))
    runner.join(10)
    last = {u[0]: u for u in sink.updates}
    work_dir = f"the Mesos agent's work directory (every task's sandbox) {root}/mesos"
    assert last["t1"][1:3] == (
        "TASK_FAILED",
        f"volume {other}:/x: it lies inside {work_dir}; {FIX}",
    )
    assert last["t2"][1:3] == (
        "TASK_FAILED",
        f"volume {root}/run:/x: it contains DLC's MPS pipes {root}/run/dlc-mps; {FIX}",
    )
    assert last["t3"][1] == "TASK_FINISHED"  # a data folder beside them is mounted
    created = [c for c in runtime.calls if c[0] == "create"]
    assert len(created) == 1  # the refused tasks never reached the engine


def test_dlc_local_keeps_jobs_off_its_work_dir_with_the_admin_token(tmp_path):
    # `dlc local --allow-volume $HOME` with its work dir in $HOME: the token file is a plain file
    work = tmp_path.resolve() / ".dlc-local"
    (work / "mesos").mkdir(parents=True)
    (work / "admin.token").write_text("secret\n")
    specs = with_state_dir(pool_specs(LocalConfig(simulate=str(DGX1)))[0], work)
    env = dict(specs[0].executor_env)
    assert env[STATE_DIRS_VARIABLE] == str(work)
    sandbox = str(work / "mesos" / "slaves" / "S" / "frameworks" / "F" / "executors" / "E")
    state = runner_state_paths(f"{sandbox}/runs/C", env=env)
    text = _refusal(f"{work}/admin.token", str(tmp_path.resolve()), state)
    assert f"it lies inside DLC's state directory {work};" in text


def test_a_volume_on_a_kernel_filesystem_is_refused_wherever_it_is_mounted():
    """Session 14 (finding 61): besides ``/proc`` and ``/sys`` by name, a volume is refused by
    its filesystem's type: ``/dev/pts`` (devpts) under an allowed ``/dev`` is no state by name,
    but a kernel view all the same. Storage (the test's own folders) is none."""
    fd = os.open("/proc", os.O_PATH)
    try:
        assert kernel_filesystem(fd) == "proc"
    finally:
        os.close(fd)
    fd = os.open(os.getcwd(), os.O_PATH)
    try:
        assert kernel_filesystem(fd) is None
    finally:
        os.close(fd)
    with pytest.raises(MountRefused) as err:
        check_volume(Volume("/dev/pts", "/x"), ("/dev",), resolve(()))
    assert str(err.value) == (
        "volume /dev/pts:/x: the host path is on the host's devpts filesystem, a view of the "
        "host's kernel and of every process on it (other tenants' included), not data; mount a "
        "data directory"
    )


def test_the_runner_refuses_the_engines_data_root_wherever_the_operator_moved_it(tmp_path):
    """Red-team finding 62 (session 14): the engine's data was known only at
    ``/var/lib/docker``. On a host whose ``data-root`` is on the data disk (DGX hosts put it on
    ``/raid``, the usual ``--allow-volume`` tree), a job mounted it: every container's files
    (``overlay2/*/merged``, other tenants' included, read-write) and configuration
    (``containers/*/config.v2.json``: their environments). The runner asks the engine
    (``docker info`` ``DockerRootDir``) once and keeps every volume off it."""
    root = tmp_path.resolve()
    data_root = root / "raid" / "docker"
    (data_root / "containers" / "c1").mkdir(parents=True)
    (root / "raid" / "alice").mkdir()
    runtime = FakeRuntime()
    runtime.data_root = str(data_root)
    runner, runtime, sink = make(_mesos_sandbox(root, "E1"), runtime=runtime)
    runner.pin_volumes = lambda spec, staging: (spec, lambda: None)  # no CAP_SYS_ADMIN here
    policy = TaskPolicy(allowed_volumes=(f"{root}/raid",))
    hosts = (data_root / "containers", data_root, root / "raid", root / "raid" / "alice")
    for number, host in enumerate(hosts):
        runner.launch(f"t{number}", data(volumes=(Volume(str(host), "/x"),), policy=policy))
    runner.join(10)
    last = {u[0]: u[1:3] for u in sink.updates}
    engine = f"the Docker engine's data {data_root}"
    assert last["t0"] == ("TASK_FAILED", f"volume {hosts[0]}:/x: it lies inside {engine}; {FIX}")
    assert last["t1"] == ("TASK_FAILED", f"volume {hosts[1]}:/x: it is {engine}; {FIX}")
    assert last["t2"] == ("TASK_FAILED", f"volume {hosts[2]}:/x: it contains {engine}; {FIX}")
    assert last["t3"][0] == "TASK_FINISHED"  # the user's own data beside it is mounted
    assert runtime.state_asked == 1  # asked once, not per task
