"""Host escape attempts against the real engine: symlinked volumes, missing paths, root, registries.

Each attack of issue 10 item 2 runs as the real TaskRunner would run it: the task ends
TASK_FAILED with a one-line message and the engine never sees a container for it.
"""

from __future__ import annotations

import os

import pytest

from dlc.errors import ContainerError
from dlc.executor.container_spec import LABEL_FRAMEWORK, TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuReservation, GpuStyle, render
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.executor.volume_pins import bind, unbind
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume


class Sink:
    def __init__(self):
        self.updates = []

    def update(self, task_id, state, message=None, reason=None, labels=None):
        self.updates.append((state, message))

    def last(self):
        return self.updates[-1]


class CountingRuntime:
    """The real runtime, counting the containers it is asked to create."""

    def __init__(self, runtime):
        self._runtime = runtime
        self.created = []

    def create(self, kwargs):
        cid = self._runtime.create(kwargs)
        self.created.append(cid)
        return cid

    def __getattr__(self, name):
        return getattr(self._runtime, name)


@pytest.fixture
def prefix(tmp_path):
    """An allowed prefix holding ``d``, a directory every job may write (mode 1777)."""
    root = tmp_path.resolve() / "srv" / "a"
    (root / "d").mkdir(parents=True)
    os.chmod(root / "d", 0o1777)
    os.chmod(tmp_path, 0o755)
    return root


@pytest.fixture
def sandbox(tmp_path):
    """The executor's sandbox, beside the allowed prefix (a volume may not reach it)."""
    box = tmp_path.resolve() / "sandbox"
    box.mkdir()
    return box


@pytest.fixture
def run_task(docker_runtime, framework_id, tmp_path, busybox_image, sandbox):
    counting = CountingRuntime(docker_runtime)

    def run(task_id, **spec):
        sink = Sink()
        config = RunnerConfig(
            gpu_style=GpuStyle.NONE,
            sandbox=str(sandbox),
            driver_info=ProcDriverInfo(tmp_path / "no-driver"),
        )
        runner = TaskRunner(counting, sink, framework_id, f"ex-{task_id}", config)
        spec.setdefault("image", busybox_image)
        runner.launch(task_id, LaunchSpec(job_id=task_id, **spec).encode())
        runner.join(60)
        return sink.last()

    run.runtime = counting
    return run


def test_symlink_to_host_root_planted_by_one_job_is_refused_for_the_next(run_task, prefix):
    policy = TaskPolicy(allowed_volumes=(str(prefix),))
    # job 1: a legitimate read-write mount, in which it plants a link to the host's root
    state, message = run_task(
        "plant",
        command=("sh", "-c", "ln -s / /w/hostroot && echo planted"),
        volumes=(Volume(f"{prefix}/d", "/w", read_only=False),),
        policy=policy,
    )
    assert state == "TASK_FINISHED", message
    assert os.readlink(prefix / "d" / "hostroot") == "/"
    created = len(run_task.runtime.created)
    # job 2: mounts the link and would read the host's /etc/shadow
    state, message = run_task(
        "escape",
        command=("cat", "/h/etc/shadow"),
        volumes=(Volume(f"{prefix}/d/hostroot", "/h"),),
        policy=policy,
    )
    assert state == "TASK_FAILED"
    assert f"{prefix}/d/hostroot is a symbolic link" in message and "\n" not in message
    assert len(run_task.runtime.created) == created  # the engine never saw a container


def test_missing_path_fails_and_is_not_created_on_the_host(run_task, prefix):
    missing = prefix / "d" / "new"
    state, message = run_task(
        "missing",
        command=("true",),
        volumes=(Volume(str(missing), "/w", read_only=False),),
        policy=TaskPolicy(allowed_volumes=(str(prefix),)),
    )
    assert state == "TASK_FAILED"
    assert "does not exist on this agent and DLC never creates host paths" in message
    assert not missing.exists()
    assert run_task.runtime.created == []


def test_dotdot_and_symlinked_prefix_are_refused(run_task, prefix, tmp_path):
    link = tmp_path / "link"
    os.symlink(prefix, link)
    cases = [
        (Volume(f"{prefix}/d/../../..", "/w"), (str(prefix),), "'.' or '..'"),
        (Volume(f"{link}/d", "/w"), (str(link),), f"allowed prefix {link} is not a real"),
    ]
    for volume, allowed, expected in cases:
        state, message = run_task(
            "refused", volumes=(volume,), policy=TaskPolicy(allowed_volumes=allowed)
        )
        assert state == "TASK_FAILED" and expected in message, message
    assert run_task.runtime.created == []


def test_a_volume_holding_dlc_state_never_reaches_the_engine(run_task, sandbox, prefix, tmp_path):
    """Session 13: under an allowed /run a job mounted /run itself, with the MPS pipes of other
    tenants' shares and the engine's socket in it; under an allowed tree, its own sandbox."""
    cases = [
        ("/run", "/run", "it contains DLC's MPS pipes /run/dlc-mps;"),
        (str(sandbox), str(tmp_path.resolve()), f"it is this executor's sandbox {sandbox};"),
    ]
    for host, allowed, expected in cases:
        state, message = run_task(
            "state", command=("ls", "/h"), volumes=(Volume(host, "/h"),),
            policy=TaskPolicy(allowed_volumes=(allowed,)),
        )  # fmt: skip
        assert state == "TASK_FAILED" and expected in message, message
        assert message.endswith("mount a directory that does not hold DLC's state")
    assert run_task.runtime.created == []
    # the same broad prefix still mounts a data folder beside the state
    state, message = run_task(
        "beside", command=("ls", "/h"), volumes=(Volume(f"{prefix}/d", "/h"),),
        policy=TaskPolicy(allowed_volumes=(str(tmp_path.resolve()),)),
    )  # fmt: skip
    assert state == "TASK_FINISHED", message


def test_root_user_is_refused_by_default(run_task):
    state, message = run_task("root", command=("id",), policy=TaskPolicy(container_user="0:0"))
    assert state == "TASK_FAILED"
    assert "is root, which this cluster does not allow" in message
    assert run_task.runtime.created == []


def test_disallowed_registry_is_refused_before_any_pull(run_task, local_registry):
    policy = TaskPolicy(allowed_registries=(local_registry,))
    state, message = run_task("registry", image="busybox:1.36", policy=policy)
    assert state == "TASK_FAILED"
    assert "registry docker.io, which is not allowed" in message
    assert run_task.runtime.created == []


def test_job_runs_as_nobody_without_capabilities_and_reads_its_mount(
    docker_runtime, run_task, prefix, framework_id
):
    (prefix / "d" / "in.txt").write_text("data\n")
    state, message = run_task(
        "nobody",
        command=("sh", "-c", "id; grep CapEff /proc/self/status; cat /r/in.txt; touch /r/x"),
        volumes=(Volume(f"{prefix}/d", "/r"),),  # read-only by default
        policy=TaskPolicy(allowed_volumes=(str(prefix),)),
    )
    assert state == "TASK_FAILED", message  # touch on the read-only mount fails
    assert "uid=65534 gid=65534" in message
    assert "CapEff:\t0000000000000000" in message or "CapEff: 0000000000000000" in message
    assert "data" in message and "Read-only file system" in message
    assert not (prefix / "d" / "x").exists()


def test_engine_view_of_the_container(docker_runtime, busybox_image, framework_id, prefix):
    spec = LaunchSpec(
        job_id="j",
        image=busybox_image,
        volumes=(Volume(f"{prefix}/d", "/r"), Volume(f"{prefix}/d", "/w", read_only=False)),
    )
    identity = TaskIdentity(framework_id, "ex-inspect", "t-inspect", "j")
    kwargs = create_kwargs(spec, identity, render(GpuReservation(), GpuStyle.NONE))
    cid = docker_runtime.create(kwargs)
    inspect = docker_runtime.client.api.inspect_container(cid)
    host = inspect["HostConfig"]
    assert inspect["Config"]["User"] == "65534:65534"
    assert host["CapDrop"] == ["ALL"]
    assert set(host["CapAdd"]) == {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["Privileged"] is False
    assert host["Binds"] in (None, [])  # `-v` would create a missing source; mounts do not
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    assert mounts["/r"]["Type"] == "bind" and mounts["/r"]["RW"] is False
    assert mounts["/w"]["Type"] == "bind" and mounts["/w"]["RW"] is True
    assert mounts["/r"]["Source"] == f"{prefix}/d"


def test_engine_refuses_a_missing_bind_source_itself(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    # even without the agent-side check, type=bind never lets the engine create the path
    missing = tmp_path / "never-created"
    spec = LaunchSpec(job_id="j", image=busybox_image, volumes=(Volume(str(missing), "/x"),))
    identity = TaskIdentity(framework_id, "ex-missing", "t-missing", "j")
    with pytest.raises(ContainerError, match="bind source path does not exist"):
        docker_runtime.create(
            create_kwargs(spec, identity, render(GpuReservation(), GpuStyle.NONE))
        )
    assert not missing.exists()
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []


def _swap_to_symlink(directory, target):
    """What a racing job does: move the checked directory away and plant a symlink there."""
    directory.rename(directory.with_name(directory.name + ".moved"))
    directory.symlink_to(target)


@pytest.mark.parametrize("when", ["after-pin", "between-check-and-pin"])
def test_swapping_a_checked_path_for_a_symlink_never_redirects_the_mount(
    docker_runtime, framework_id, tmp_path, busybox_image, prefix, sandbox, when
):
    """The red-team race (11 of 40 escapes before): a component of a checked path is swapped
    for a symlink before the container starts. Pinned mounts keep the checked directory; a
    swap before the pin is caught and the task fails."""
    real = prefix / "d" / "x"
    real.mkdir()
    (real / "who").write_text("checked directory\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "who").write_text("OUTSIDE THE ALLOWED PREFIX\n")
    sink = Sink()
    config = RunnerConfig(
        gpu_style=GpuStyle.NONE, sandbox=str(sandbox), driver_info=ProcDriverInfo(tmp_path / "nd")
    )
    runner = TaskRunner(docker_runtime, sink, framework_id, f"ex-race-{when}", config)
    pin = runner.pin_volumes

    def racing_pin(spec, staging):
        if when == "between-check-and-pin":
            _swap_to_symlink(real, outside)
            return pin(spec, staging)
        pinned = pin(spec, staging)
        _swap_to_symlink(real, outside)
        return pinned

    runner.pin_volumes = racing_pin
    spec = LaunchSpec(
        job_id=f"race-{when}",
        image=busybox_image,
        command=("cat", "/r/who"),
        volumes=(Volume(f"{prefix}/d/x", "/r"),),
        policy=TaskPolicy(allowed_volumes=(str(prefix),)),
    )
    runner.launch(f"race-{when}", spec.encode())
    runner.join(60)
    state, message = sink.last()
    assert "OUTSIDE" not in message
    if when == "after-pin":
        assert state == "TASK_FINISHED", message
        assert (
            "checked directory" in message
            or "checked directory" in (sandbox / "stdout").read_text()
        )
    else:
        assert state == "TASK_FAILED"
        assert "symbolic link" in message and "changed after it was checked" in message
    staging = sandbox / ".dlc-volumes" / f"race-{when}"
    assert not staging.exists() or not any(staging.iterdir())  # unmounted and removed


def test_user_placeholder_keeps_each_user_in_their_own_tree(run_task, prefix):
    """`--allow-volume /data/{user}`: mallory cannot mount alice's directory (red-team)."""
    (prefix / "alice").mkdir()
    (prefix / "alice" / "secret").write_text("alice's\n")
    (prefix / "mallory").mkdir()
    policy = TaskPolicy(allowed_volumes=(f"{prefix}/{{user}}",))
    state, message = run_task(
        "steal", user="mallory", command=("cat", "/r/secret"),
        volumes=(Volume(f"{prefix}/alice", "/r"),), policy=policy,
    )  # fmt: skip
    assert state == "TASK_FAILED" and "not under a host path" in message
    assert f"{prefix}/mallory" in message  # the allow-list as it applies to mallory
    state, message = run_task(
        "own", user="alice", command=("cat", "/r/secret"),
        volumes=(Volume(f"{prefix}/alice", "/r"),), policy=policy,
    )  # fmt: skip
    assert state == "TASK_FINISHED" and "alice's" in message


@pytest.fixture
def other_tenant(docker_runtime, busybox_image, framework_id):
    """Another user's running task: uid 65534 as every job, a secret in its environment and
    a workspace it owns (``/tmp`` of its own filesystem)."""
    container = docker_runtime.client.containers.run(
        busybox_image, ["sleep", "120"], detach=True, user="65534:65534",
        environment={"API_KEY": "alice-secret-7f3a"},
        labels={LABEL_FRAMEWORK: framework_id},
    )  # fmt: skip
    container.reload()
    yield container.attrs["State"]["Pid"]
    container.remove(force=True)


def test_a_host_proc_volume_under_a_wide_prefix_is_refused(run_task, other_tenant, prefix):
    """Red-team finding 61 (session 14): with ``--allow-volume /`` a job mounted the host's
    ``/proc`` (read-only) and, running as uid 65534 like every other job, read another
    tenant's environment (``/proc/PID/environ``) and wrote into its filesystem through the
    magic link ``/proc/PID/root``, which leaves the read-only mount. ``/proc``, ``/sys`` and
    ``/dev/shm`` are refused by name now (submit does too), and any volume on a kernel
    filesystem by its type: here ``/proc/PID`` bound under an allowed data tree."""
    pid = other_tenant
    alias = prefix / "d" / "alias"
    alias.mkdir()
    bind(f"/proc/{pid}", str(alias))
    try:
        cases = [
            ("/proc", "/", "it is the host's process table /proc;"),
            (f"/proc/{pid}", "/", "it lies inside the host's process table /proc;"),
            ("/sys/fs/cgroup", "/", "it lies inside the host's kernel and device tree /sys;"),
            (str(alias), str(prefix), "the host path is on the host's proc filesystem"),
        ]
        for host, allowed, expected in cases:
            state, message = run_task(
                "proc", command=("sh", "-c", "cat /h/environ /h/*/environ; touch /h/root/tmp/x"),
                volumes=(Volume(host, "/h"),), policy=TaskPolicy(allowed_volumes=(allowed,)),
            )  # fmt: skip
            assert state == "TASK_FAILED" and expected in message, message
            assert "alice-secret" not in message
    finally:
        unbind(str(alias))
    assert run_task.runtime.created == []


def test_the_engine_names_its_data_root_for_the_volume_check(docker_runtime):
    """Finding 62: the runner keeps volumes off the engine's ``DockerRootDir``, as the engine
    itself reports it (this engine: its default, ``/var/lib/docker``)."""
    root = docker_runtime.client.info()["DockerRootDir"]
    assert docker_runtime.engine_state() == ((root, "the Docker engine's data"),)
