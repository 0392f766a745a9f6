"""The executor's core: one task's life from LAUNCH to its terminal status, on any runtime.

:class:`TaskRunner` knows nothing about pymesos: it reports through a :class:`StatusSink`
and drives containers through a runtime with :class:`~dlc.executor.runtime.DockerRuntime`'s
methods, so tests can swap either. Each task runs on its own thread (Mesos callbacks must not
block); every task ends with exactly one terminal update.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dlc.devices.amd.host import SysfsDrm
from dlc.errors import ContainerError, DlcError
from dlc.executor.container_spec import (
    LABEL_EXECUTOR,
    LABEL_FRAMEWORK,
    LABEL_TASK,
    TaskIdentity,
    create_kwargs,
)
from dlc.executor.env_server import IdleWatch, write_env_file
from dlc.executor.exec_server import ExecServer, docker_exec
from dlc.executor.gpu_claim import (
    LABEL_EXECUTOR_PID,
    LABEL_GPUS,
    HeldGpus,
    executor_pid_label,
    gpus_label,
    parse_gpus_label,
    parse_share_gpu,
    plan_claim,
    process_start_time,
)
from dlc.executor.gpu_render import GpuReservation, GpuStyle, driver_volume_name, pick_style, render
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.host_paths import check_image, checked_spec
from dlc.executor.loopback_guard import LoopbackGuard
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.render import LABEL_SHARE, apply_share
from dlc.executor.sharing.shim import find_library as find_shim_library
from dlc.executor.state_paths import StatePath, runner_state_paths
from dlc.executor.usage import UsageSampler
from dlc.executor.volume_pins import pin_volumes
from dlc.executor.workdir import prepare as prepare_job_folders
from dlc.scheduler.jobs.launch_spec import LaunchSpec, parse_user

log = logging.getLogger(__name__)

#: TaskStatus label carrying the Docker container id (on TASK_RUNNING and after)
CONTAINER_ID_LABEL = "dlc.container_id"
#: simulated GPUs belong to one agent of one framework: two agents on one host (mesos-local
#: with MESOS_NUM_SLAVES=2, the emulator) each have their own GPU 0
LABEL_SIM_AGENT = "dlc.sim_agent"


class StatusSink(Protocol):
    """Where task status updates go (the pymesos driver, or a test's list)."""

    def update(
        self,
        task_id: str,
        state: str,
        message: str | None = None,
        reason: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """Send one TaskStatus (``state`` is a Mesos TaskState name)."""
        ...


#: how long a finished task waits for the rest of its output to reach the sandbox
LOG_DRAIN_S = 120.0


@dataclass
class RunnerConfig:
    """How the executor runs containers (``dlc executor`` flags).

    Attributes:
        gpu_style: ``auto`` picks toolkit/legacy from the engine, or a fixed style.
        device_root: host directory of the ``nvidia*`` device nodes (legacy style).
        grace_s: SIGTERM -> SIGKILL grace period on KILL and SHUTDOWN.
        network_mode: Docker network mode of task containers.
        memlock_unlimited: lift the locked-memory limit (RDMA/NCCL hosts).
        sandbox: directory whose ``stdout``/``stderr`` files receive container output.
        tail_lines: how many last output lines go into the terminal status message.
        driver_info: host driver facts (minors, driver version).
        driver_version: driver version to assume when the task does not carry one (overrides
            ``driver_info``; for hosts whose /proc lacks the driver, e.g. tests).
        claim_lock_path: host file locked while GPUs are checked and the container created, so
            that two executors on one host never claim the same GPU at the same moment.
        claim_timeout_s: how long to wait for Docker to confirm an orphan container is gone.
        shares: GPU-share enforcement (MPS daemons, watchdog, MIG); a default one if None.
        gpu_vendor: whose GPUs this agent has (``nvidia``/``amd``): picks the device backend.
        drm: this host's AMD DRM nodes (render/card numbers per GPU index).
        usage: samples the GPUs of running tasks and reports them (None: no sampling).
        simulated_gpus: this agent's GPUs are simulated (``dlc local``), even when stand-in
            device nodes are rendered: they are claimed within this framework and agent only,
            like style ``none`` GPUs, so another simulated agent's GPU numbers never clash.
        loopback_guard: installs or checks the firewall that keeps host-network containers
            off the agent's loopback services, before each such container is created.
    """

    gpu_style: GpuStyle = GpuStyle.AUTO
    device_root: str = "/dev"
    grace_s: float = 10.0
    network_mode: str = "bridge"
    memlock_unlimited: bool = False
    sandbox: str = field(default_factory=os.getcwd)
    tail_lines: int = 20
    driver_info: ProcDriverInfo = field(default_factory=ProcDriverInfo)
    driver_version: str | None = None
    claim_lock_path: str = "/tmp/dlc-gpu-claim.lock"
    claim_timeout_s: float = 60.0
    shares: ShareHook | None = None
    usage: UsageSampler | None = None
    gpu_vendor: str = "nvidia"
    drm: SysfsDrm = field(default_factory=SysfsDrm)
    simulated_gpus: bool = False
    loopback_guard: LoopbackGuard = field(default_factory=LoopbackGuard)


@dataclass
class _Task:
    task_id: str
    container_id: str | None = None
    #: the TaskInfo's kill_policy grace (None: the runner's ``grace_s``)
    grace_s: float | None = None
    killed: bool = False
    #: a kill's stop (SIGTERM, grace, SIGKILL) is under way: a repeated kill waits for it
    stopping: bool = False
    terminal_sent: bool = False
    #: undoes the task's pinned volume mounts (after its container is removed)
    unpin: Callable[[], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None


class TaskRunner:
    """Runs the tasks of one executor as containers.

    Args:
        runtime: container operations (:class:`~dlc.executor.runtime.DockerRuntime`).
        sink: where status updates go.
        framework_id: Mesos framework id (container label).
        executor_id: Mesos executor id (container label; orphan removal selects on it).
        config: runner settings.
    """

    def __init__(self, runtime, sink: StatusSink, framework_id: str, executor_id: str, config=None):
        self.runtime = runtime
        self.sink = sink
        self.framework_id = framework_id
        self.executor_id = executor_id
        self.config = config or RunnerConfig()
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()
        self._shut_down = False
        self.shares = self.config.shares or ShareHook()
        #: volume pinning (tests without CAP_SYS_ADMIN swap in a fake)
        self.pin_volumes = pin_volumes
        self._engine_places: tuple[tuple[str, str], ...] | None = None
        self._engine_lock = threading.Lock()
        self.shares.bind(runtime, self.config.grace_s)
        self.usage = self.config.usage
        if self.usage is not None:  # pids through Docker's top; reports as framework messages
            self.usage.bind(self.shares.pids_of, getattr(sink, "message", None))

    # callbacks (each returns quickly) -----------------------------------------------------------
    def launch(self, task_id: str, data: str, grace_s: float | None = None) -> None:
        """Start running one task (LAUNCH); the work happens on a thread.

        Args:
            grace_s: the task's own kill grace (its TaskInfo ``kill_policy``), if any.
        """
        with self._lock:
            if task_id in self._tasks:
                # a redelivered LAUNCH: the first one owns the task and its updates
                log.warning("ignoring a second LAUNCH of task %s", task_id)
                return
            if self._shut_down:
                self.sink.update(task_id, "TASK_FAILED", "executor is shutting down")
                return
            task = self._tasks[task_id] = _Task(task_id, grace_s=grace_s)
        task.thread = threading.Thread(
            target=self._run_guarded, args=(task, data), name=f"task-{task_id}", daemon=True
        )
        task.thread.start()

    def kill(self, task_id: str) -> None:
        """KILL: SIGTERM, grace period, SIGKILL, then TASK_KILLED (on a thread)."""
        task = self._tasks.get(task_id)
        if task is None:
            # Mesos expects a terminal update for a kill of an unknown task.
            self.sink.update(task_id, "TASK_LOST", "task unknown to this executor")
            return
        with task.lock:
            if task.stopping:
                # The scheduler sends a kill again until the task ends: a second SIGTERM
                # would cut short what the job does in its grace period (checkpointing).
                return
            task.stopping = True
        threading.Thread(target=self._kill_guarded, args=(task,), daemon=True).start()

    def shutdown(self) -> list[str]:
        """SHUTDOWN: stop and remove every container of this executor (idempotent, blocking).

        Returns:
            Ids of the containers removed by this call.
        """
        with self._lock:
            self._shut_down = True
            tasks = list(self._tasks.values())
        for task in tasks:
            with task.lock:
                task.killed = True
        removed = self.remove_orphans()
        for task in tasks:
            self._terminal(task, "TASK_KILLED", "executor shut down")
        return removed

    def remove_orphans(self) -> list[str]:
        """Stop and remove every container labelled with this framework and executor id."""
        found = self.runtime.list_containers(
            {LABEL_FRAMEWORK: self.framework_id, LABEL_EXECUTOR: self.executor_id}
        )
        return self.runtime.remove_all(found, self.config.grace_s)

    def join(self, timeout: float | None = None) -> None:
        """Wait for every task thread (tests and orderly exits)."""
        for task in list(self._tasks.values()):
            if task.thread is not None:
                task.thread.join(timeout)

    # task life ------------------------------------------------------------------------------
    def _run_guarded(self, task: _Task, data: str) -> None:
        # The container is removed BEFORE the terminal update: a terminal state tells the
        # scheduler that the task's GPUs are free (a retry never overlaps the old container).
        outcome = None
        try:
            outcome = self._run(task, data)
        except DlcError as exc:
            outcome = ("TASK_FAILED", str(exc), "REASON_CONTAINER_LAUNCH_FAILED")
        except Exception as exc:  # a bug must still end the task, not hang it
            log.exception("task %s crashed", task.task_id)
            outcome = ("TASK_FAILED", f"executor error: {exc!r}", "REASON_EXECUTOR_TERMINATED")
        finally:
            self._remove_container(task)
            if task.unpin is not None:
                task.unpin()  # after removal: the container no longer holds the mounts
            self.shares.finished(task.task_id)  # after removal: the last share stops MPS
            if self.usage is not None:
                self.usage.finished(task.task_id)
            if outcome is not None:
                self._terminal(task, *outcome)

    def _run(self, task: _Task, data: str) -> tuple | None:
        """Runs the task; returns its terminal (state, message, reason), None when killed."""
        self.sink.update(task.task_id, "TASK_STARTING", "preparing container")
        spec = LaunchSpec.decode(data)
        check_image(spec)  # the registry allow-list, before anything is pulled
        identity = TaskIdentity(self.framework_id, self.executor_id, task.task_id, spec.job_id)
        style = self._style(spec)
        gpu_args = render(self._reservation(spec), style, self.config.device_root)
        share_args = None
        if spec.share is not None:  # a share of one GPU: its backend renders the device
            share_args = self.shares.prepare(
                task.task_id, spec.share, style, self._driver_version(spec), self.config.device_root
            )
            gpu_args = share_args.gpu
        image_env = self.runtime.ensure_image(
            spec.image, lambda msg: self.sink.update(task.task_id, "TASK_STARTING", msg)
        )
        # volumes resolved on this host, kept off DLC's state, user policy; last before create
        spec = checked_spec(spec, self.state_paths())
        # /workspace (the --workdir snapshot) and /outputs live in the sandbox (dlc cp reads it)
        # the snapshot is unpacked as the container's uid (checked_spec vetted it), not root
        user = parse_user(spec.policy.container_user)
        folders = prepare_job_folders(
            Path(self.config.sandbox), spec.workdir_url, spec.job_secret, user
        )
        # Docker mounts by path: pin each checked volume to the inode the check saw.
        spec, task.unpin = self.pin_volumes(spec, self._sandbox(f".dlc-volumes/{task.task_id}"))
        kwargs = create_kwargs(
            spec,
            identity,
            gpu_args,
            image_env,
            self.config.network_mode,
            self.config.memlock_unlimited,
            folders,
        )
        if share_args is not None:
            kwargs = apply_share(kwargs, share_args)
        if kwargs.get("network_mode") == "host":
            # the host's loopback comes with its network (red-team finding 59)
            self.config.loopback_guard.before_host_network(task.task_id, user[0])
        kwargs["labels"] = {
            # Docker copies the image's labels onto the container unless it sets them: a
            # share label from a user's image would claim a GPU this task was never given
            LABEL_SHARE: "",
            **kwargs.get("labels", {}),
            LABEL_GPUS: gpus_label(spec.gpu_ids),
            LABEL_EXECUTOR_PID: executor_pid_label(),
        }
        simulated = style is GpuStyle.NONE or self.config.simulated_gpus
        if simulated and os.environ.get("MESOS_SLAVE_ID"):
            kwargs["labels"][LABEL_SIM_AGENT] = os.environ["MESOS_SLAVE_ID"]
        with self._gpu_claim_lock():
            # simulated GPUs (style none) are only this framework's agent's; real ones the host's
            scope = self.framework_id if simulated else None
            self._claim_gpus(task, spec, scope)
            with task.lock:
                if task.killed:
                    return None
                task.container_id = self.runtime.create(kwargs)
        tail: collections.deque = collections.deque(maxlen=self.config.tail_lines)
        self.runtime.start(task.container_id, spec.image)
        readers = self.runtime.follow_logs(
            task.container_id, self._sandbox("stdout"), self._sandbox("stderr"), tail
        )
        self.sink.update(
            task.task_id,
            "TASK_RUNNING",
            f"container {task.container_id[:12]} running {spec.image}",
            labels={CONTAINER_ID_LABEL: task.container_id},
        )
        self.shares.started(task.task_id, task.container_id)
        if self.usage is not None:
            self.usage.started(task.task_id, task.container_id, spec.gpus_used)
        watch = self._watch_idle(spec, task.container_id)
        exec_server = self._serve_exec(spec, task.container_id)
        result = self.runtime.wait(task.container_id)
        if exec_server is not None:
            exec_server.close(Path(self.config.sandbox))
        # The log stream ends once the engine has delivered everything the container wrote;
        # removing the container earlier cut a 300 MB output at 47 MB (red-team). Bounded.
        for reader in readers:
            reader.join(timeout=LOG_DRAIN_S)
        if watch is not None:
            watch.close()
            if watch.reason:  # the environment was stopped for idleness: a normal end
                return ("TASK_FINISHED", watch.reason, None)
        return self.shares.outcome(task.task_id) or exit_outcome(result, list(tail))

    def _serve_exec(self, spec: LaunchSpec, container_id: str) -> ExecServer | None:
        """``dlc exec`` into this container while it runs (needs the job's secret)."""
        client = getattr(self.runtime, "client", None)  # the real engine only
        if not spec.job_secret or client is None:
            return None
        server = ExecServer(spec.job_secret, docker_exec(client, container_id))
        return server.start(Path(self.config.sandbox))

    def _watch_idle(self, spec: LaunchSpec, container_id: str) -> IdleWatch | None:
        """For an environment: say where its server is and stop it when idle."""
        if not spec.publish:
            return None
        write_env_file(Path(self.config.sandbox), spec)
        if not spec.idle_timeout_s:
            return None
        stop = lambda: self.runtime.stop(container_id, self.config.grace_s)  # noqa: E731
        return IdleWatch(spec, stop, poll_s=min(5.0, spec.idle_timeout_s / 4)).start()

    def _kill_guarded(self, task: _Task) -> None:
        try:
            with task.lock:
                task.killed = True
                container_id = task.container_id
            if container_id:
                grace = self.config.grace_s if task.grace_s is None else task.grace_s
                self.runtime.stop(container_id, grace)
                self._remove_container(task)
            self._terminal(task, "TASK_KILLED", "killed on request (SIGTERM, then SIGKILL)")
        except Exception as exc:
            log.exception("killing task %s", task.task_id)
            with task.lock:
                task.stopping = False  # a later kill tries the stop again
            self._terminal(task, "TASK_KILLED", f"killed; cleanup failed: {exc}")

    def _terminal(self, task: _Task, state: str, message: str, reason: str | None = None) -> None:
        with task.lock:
            if task.terminal_sent:
                return
            if task.killed and state != "TASK_KILLED":
                state, message, reason = "TASK_KILLED", "killed on request", None
            task.terminal_sent = True
        self.sink.update(task.task_id, state, message, reason)

    def _remove_container(self, task: _Task) -> None:
        if task.container_id:
            try:
                self.runtime.remove(task.container_id)
            except ContainerError as exc:
                log.warning("task %s: %s", task.task_id, exc)

    # GPU exclusivity --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _gpu_claim_lock(self):
        """Host-wide lock (``flock``) around GPU check + create; no lock if the file cannot be."""
        try:
            handle = open(self.config.claim_lock_path, "a")  # noqa: SIM115
        except OSError as exc:
            log.warning("GPU claim lock %s unusable (%s)", self.config.claim_lock_path, exc)
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            handle.close()  # closing releases the lock

    def _claim_gpus(
        self, task: _Task, spec: LaunchSpec, framework_scope: str | None = None
    ) -> None:
        """Make sure no other container on this engine holds a GPU the task is given.

        The task's whole GPUs, or the one GPU of its share (other live shares there are no
        conflict; :func:`~dlc.executor.gpu_claim.plan_claim`). Orphans (their executor is gone)
        are stopped and removed, and the claim returns only once Docker no longer lists them; a
        live executor's container fails the task. With ``framework_scope`` only that framework's
        containers count (simulated GPUs).

        Raises:
            ContainerError: a double assignment, or an orphan that would not go away.
        """
        gpu_ids = spec.gpus_used
        if not gpu_ids:
            return
        deadline = time.monotonic() + self.config.claim_timeout_s
        while True:
            plan = plan_claim(
                gpu_ids,
                self._held_gpus(framework_scope),
                process_start_time,
                self._own_container_ids(),
                share=spec.share is not None,
            )
            if plan.conflicts:
                raise ContainerError(plan.conflict_message(gpu_ids))
            if not plan.remove:
                return
            for held in plan.remove:
                self.sink.update(
                    task.task_id,
                    "TASK_STARTING",
                    f"removing orphan container {held.name} on GPUs "
                    f"{sorted(held.gpu_ids | held.share_gpus)}",
                )
                log.warning("task %s: removing orphan container %s", task.task_id, held.name)
                if held.state == "running":
                    self.runtime.stop(held.container_id, self.config.grace_s)
                self.runtime.remove(held.container_id)
            if time.monotonic() > deadline:
                raise ContainerError(
                    f"orphan containers on GPUs {list(gpu_ids)} still present after "
                    f"{self.config.claim_timeout_s:g} s; remove them with `dlc cleanup`"
                )

    def _held_gpus(self, framework_scope: str | None) -> list[HeldGpus]:
        labels: dict[str, str | None] = {LABEL_GPUS: None}
        if framework_scope:
            labels[LABEL_FRAMEWORK] = framework_scope
            if os.environ.get("MESOS_SLAVE_ID"):
                labels[LABEL_SIM_AGENT] = os.environ["MESOS_SLAVE_ID"]
        found = self.runtime.list_containers(labels)
        return [
            HeldGpus(
                c.id,
                c.name,
                c.status,
                parse_gpus_label(c.labels.get(LABEL_GPUS)),
                c.labels.get(LABEL_EXECUTOR_PID),
                c.labels.get(LABEL_TASK, ""),
                parse_share_gpu(c.labels.get(LABEL_SHARE)),
            )
            for c in found
        ]

    def _own_container_ids(self) -> list[str]:
        with self._lock:
            return [t.container_id for t in self._tasks.values() if t.container_id]

    # facts ----------------------------------------------------------------------------------
    def _reservation(self, spec: LaunchSpec) -> GpuReservation:
        if not spec.gpu_ids:
            return GpuReservation()
        if self.config.gpu_vendor == "amd":
            return self._amd_reservation(spec)
        driver = self._driver_version(spec)
        minors = spec.gpu_minors
        if not minors:
            host = self.config.driver_info.minors()
            minors = tuple(host.get(i, i) for i in spec.gpu_ids)
        uuids = spec.gpu_uuids if len(spec.gpu_uuids) == len(spec.gpu_ids) else ()
        return GpuReservation(spec.gpu_ids, minors, uuids, driver)

    def _amd_reservation(self, spec: LaunchSpec) -> GpuReservation:
        """The GPUs' render/card numbers from sysfs (usual numbering where sysfs is silent)."""
        host = self.config.drm.gpus()
        renders = tuple(host[i].render if i < len(host) else 128 + i for i in spec.gpu_ids)
        cards = tuple(host[i].card if i < len(host) else i for i in spec.gpu_ids)
        return GpuReservation(spec.gpu_ids, renders, vendor="amd", cards=cards)

    def _driver_version(self, spec: LaunchSpec) -> str | None:
        return (
            spec.driver_version
            or self.config.driver_version
            or self.config.driver_info.driver_version()
        )

    def _style(self, spec: LaunchSpec) -> GpuStyle:
        configured = self.config.gpu_style
        if not spec.gpu_ids and spec.share is None:
            return GpuStyle.NONE
        if self.config.gpu_vendor != "nvidia":
            # NVIDIA styles do not apply: the vendor backend renders real devices, unless
            # the GPUs are simulated (style none).
            return GpuStyle.NONE if configured is GpuStyle.NONE else GpuStyle.TOOLKIT
        driver = self._driver_version(spec)
        volume = bool(driver and self.runtime.volume_exists(driver_volume_name(driver)))
        if configured is GpuStyle.LEGACY and not volume:
            # Docker would silently create an empty volume of that name: refuse instead.
            raise ContainerError(
                f"legacy GPU style: no Docker volume {driver_volume_name(driver or '<unknown>')} "
                "on this agent; create it with the driver files (nvidia-docker v1 did) or use "
                "--gpu-style toolkit"
            )
        if configured is not GpuStyle.AUTO:
            return configured
        style = pick_style(configured, self.runtime.engine_runtimes(), volume)
        if style is GpuStyle.NONE:
            wanted: list[int | None] = [*spec.gpu_ids] or [
                spec.share.gpu_index if spec.share else None
            ]
            raise ContainerError(
                f"task wants GPUs {wanted} but this "
                "agent's Docker engine has no "
                "'nvidia' runtime and no nvidia_driver_<version> volume; install the NVIDIA "
                "container toolkit, or pick a style: `dlc scheduler --executor-gpu-style legacy` "
                "(or DLC_GPU_STYLE=legacy in the executor's environment)"
            )
        return style

    def state_paths(self) -> tuple[StatePath, ...]:
        """DLC's state on this agent that no job volume may reach: every agent's defaults, the
        Mesos work dir above this sandbox, and where this runner's MPS pipes, shim files and
        GPU claim lock actually are."""
        shim = self.shares.shim
        extra = [
            StatePath(self.shares.mps.root, "DLC's MPS pipes"),
            StatePath(shim.root, "DLC's shim files"),
            StatePath(self.config.claim_lock_path, "DLC's GPU claim lock"),
        ]
        library = shim.library or find_shim_library()
        if library:
            extra.append(StatePath(os.path.dirname(library), "DLC's shim library"))
        extra += [StatePath(path, what) for path, what in self._engine_state()]
        return runner_state_paths(self.config.sandbox, extra)

    def _engine_state(self) -> tuple[tuple[str, str], ...]:
        """Where the engine keeps its data, asked once (red-team finding 62: a ``data-root``
        moved under an allowed tree was every container's files, other tenants' too)."""
        with self._engine_lock:  # tasks start on threads of their own: one asks
            if self._engine_places is None:
                ask = getattr(self.runtime, "engine_state", None)  # test runtimes may lack it
                self._engine_places = tuple(ask()) if ask else ()
            return self._engine_places

    def _sandbox(self, name: str) -> str:
        return os.path.join(self.config.sandbox, name)


def exit_outcome(result, tail: list[str]) -> tuple[str, str, str | None]:
    """The terminal (state, message, reason) of a container that exited."""
    output = " | ".join(line for line in tail if line.strip())[-1500:]
    if result.exit_code == 0:
        return "TASK_FINISHED", f"exit code 0; last output: {output}", None
    reason = "REASON_CONTAINER_LIMITATION_MEMORY" if result.oom_killed else None
    cause = " (killed: out of memory)" if result.oom_killed else ""
    return "TASK_FAILED", f"exit code {result.exit_code}{cause}; last output: {output}", reason


def encode_labels(labels: dict[str, str]) -> dict:
    """Mesos ``Labels`` JSON for a dict."""
    return {"labels": [{"key": k, "value": v} for k, v in labels.items()]}


def status_data(labels: dict[str, str]) -> str:
    """Base64 JSON of ``labels`` for ``TaskStatus.data`` (read by ``dlc logs`` and tests)."""
    return base64.b64encode(json.dumps(labels).encode()).decode()
