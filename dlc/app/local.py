"""``dlc local``: Mesos emulator + agents + the DLC scheduler and API, in one process.

The agent offers this host's GPUs (NVML, then ``nvidia-smi``) or, with a topology
file, a simulated machine, advertised exactly as ``dlc node-config`` would make a
real agent do (``gpus``, ``gpu_ids`` and the ``dlc_topo``/GPU attributes). So a
new user can submit jobs on a laptop with no Mesos installed.

With ``--simulate``, ``--agents N`` runs N alike simulated agents (hostnames ``127.0.0.1``,
``127.0.0.2``, ...: all loopback on Linux), e.g. two DGX-1s for the GPU-share split of
docs/sharing.md. This host's own GPUs are one agent only: two would hand out one GPU twice.

``--simulate`` may be given more than once for a mixed pool: one agent per file (``--agents N``:
N of each), each with its own topology and vendor, e.g. a DGX-1 (``topo -m``) beside an MI300X
(``amd-smi`` output). Each agent advertises what ``dlc node-config`` prints for its file, and
its executors get the agent's vendor (``DLC_GPU_VENDOR``), as an operator sets it on a real
agent, so an AMD agent's containers are rendered by the AMD device backend.

Simulated GPUs do not exist, so their tasks' executors run with
``DLC_GPU_STYLE=none``: containers start without GPU devices while the scheduler
still places them by topology. With ``device_root`` (stand-in ``/dev/kfd`` and
``/dev/dri`` nodes made under it), a simulated AMD agent's containers get those nodes
instead, exactly as a real AMD agent's would (the render-node check of the e2e tests).

The emulator lives in this process, so after a crash (SIGKILL) of ``dlc local`` its executors
and containers are orphans. A restart ends them (executor processes get SIGTERM, containers are
stopped and removed, and it waits until Docker no longer lists them) BEFORE the agent offers
any GPU; the scheduler's reconciliation then finds those tasks unknown (TASK_LOST) and retries
them without two containers ever sharing a GPU.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlc.api.shell_relay import SessionLimits
from dlc.app.service import SchedulerService, ServiceConfig, private_dir
from dlc.errors import ConfigError, DiscoveryError, DlcError
from dlc.executor.state_paths import STATE_DIRS_VARIABLE
from dlc.mesos.framework import FrameworkConfig
from dlc.scheduler.placement.model import PlacementConfig, check_policy
from dlc.scheduler.placement.share_hold import ShareHoldSettings
from dlc.scheduler.tasks.launch import ExecutorConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from dlc.executor.runtime import DockerRuntime
    from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator
    from dlc.scheduler.core.config import ImageResolver
    from dlc.topology.model import Topology

log = logging.getLogger(__name__)


@dataclass
class LocalConfig:
    """What ``dlc local`` takes.

    Attributes:
        simulate: ``nvidia-smi topo -m`` (or ``amd-smi``/``rocm-smi``) file of a machine to
            simulate, or several (a tuple): one agent per file (None: this host).
        work_dir: state directory (job DB, sandboxes).
        api_port: API port (0: any free port).
        mesos_port: emulator port (0: any free port).
        policy: allocator policy.
        cpus, mem_mib: what the agent offers besides GPUs (default: this host's; a simulated
            machine at least 4 CPUs and 16 GiB per GPU, see :func:`default_resources`).
        gpu_model: the model every GPU advertises (a ``topo -m`` file names none); default:
            a model named in the ``--simulate`` file's name (``dgx1-v100.txt``: ``V100``).
        gpu_mem_mib: each simulated GPU's memory in MiB where the ``--simulate`` file does
            not say it (a ``topo -m`` file never does): then the agent takes GPU shares.
        executor_command: replaces ``<python> -m dlc executor`` (tests, debugging).
        allowed_volumes: host path prefixes jobs may mount.
        agents: how many alike agents to run per simulated file (more than one only with
            ``simulate``).
        device_root: a directory of stand-in ``kfd``/``dri/renderD*``/``dri/card*`` nodes that
            simulated AMD agents' containers get (None: simulated GPUs get no devices).
    """

    simulate: str | tuple[str, ...] | None = None
    work_dir: str = ".dlc-local"
    api_port: int = 8642
    mesos_port: int = 0
    policy: str = "tree"
    cpus: float | None = None
    mem_mib: int | None = None
    gpu_model: str | None = None
    gpu_mem_mib: int | None = None
    executor_command: str | None = None
    allowed_volumes: tuple[str, ...] = field(default_factory=tuple)
    admin_token: str | None = None
    agents: int = 1
    device_root: str | None = None
    #: caps on ``dlc shell``/``dlc exec`` sessions (as ``dlc scheduler --max-sessions ...``)
    sessions: SessionLimits = field(default_factory=SessionLimits)
    #: the share hold (as ``dlc scheduler --share-hold-*``; off by default)
    share_hold: ShareHoldSettings = field(default_factory=ShareHoldSettings)

    def __post_init__(self) -> None:
        check_policy(self.policy)
        check_agents(self.agents * max(1, len(self.simulate_files)), self.simulate)

    @property
    def simulate_files(self) -> tuple[str, ...]:
        """The topology files to simulate, one agent (or ``agents``) each; () for this host."""
        if not self.simulate:
            return ()
        return (self.simulate,) if isinstance(self.simulate, str) else tuple(self.simulate)


#: the most simulated agents ``dlc local`` runs (each is a few threads' work in the emulator)
MAX_LOCAL_AGENTS = 64


def check_agents(count: int, simulate: str | tuple[str, ...] | None) -> int:
    """``count`` if ``dlc local`` can run that many agents.

    Raises:
        ConfigError: fewer than 1, more than :data:`MAX_LOCAL_AGENTS`, or more than one
            without ``--simulate`` (this host's GPUs would be offered twice).
    """
    if not 1 <= count <= MAX_LOCAL_AGENTS:
        raise ConfigError(
            "agents", f"must be between 1 and {MAX_LOCAL_AGENTS}, got {count}; pass --agents N"
        )
    if count > 1 and not simulate:
        raise ConfigError(
            "agents",
            f"{count} agents of this host would offer its GPUs {count} times; "
            "add --simulate FILE, or drop --agents",
        )
    return count


def agent_specs(spec, count: int, first: int = 0) -> list:
    """``count`` copies of the agent ``spec``, named ``127.0.0.<first+1>``, ``<first+2>``, ..."""
    return [replace(spec, hostname=f"127.0.0.{first + i + 1}") for i in range(count)]


def simulated_executor_env(vendor: str, device_root: str | None) -> tuple[tuple[str, str], ...]:
    """What a simulated agent's executors get: its vendor, and no GPU devices unless an AMD
    agent has stand-in device nodes under ``device_root`` (NVIDIA ones would need a real
    driver and the ``nvidia`` runtime, so those stay deviceless)."""
    if vendor == "amd" and device_root:
        # the nodes are stand-ins: claims stay within this agent, as for style none
        return (("DLC_GPU_VENDOR", vendor), ("DLC_GPU_STYLE", "auto"), ("DLC_SIMULATED_GPUS", "1"),
                ("DLC_DEVICE_ROOT", str(Path(device_root).resolve())))  # fmt: skip
    return (("DLC_GPU_VENDOR", vendor), ("DLC_GPU_STYLE", "none"))


def with_state_dir(specs: list, work: Path) -> list:
    """``specs`` whose executors keep job volumes off ``work`` (its job store, admin token
    and sandboxes), however wide ``--allow-volume`` is (docs/executor.md)."""
    variable = (STATE_DIRS_VARIABLE, str(work))
    return [replace(spec, executor_env=(*spec.executor_env, variable)) for spec in specs]


def without_loopback_guard(specs: list) -> list:
    """``specs`` whose executors leave the host's firewall alone: the emulated agents are
    ``127.0.0.N``, so a gang's peers meet on loopback, and the emulator takes scheduler calls
    only with ``dlc local``'s framework secret (docs/security.md #35, #59)."""
    variable = ("DLC_LOOPBACK_GUARD", "off")
    return [replace(spec, executor_env=(*spec.executor_env, variable)) for spec in specs]


def host_memory_mib() -> int:
    """Total memory of this host in MiB (4 GiB when unknown)."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return max(1024, pages * size // (1 << 20))
    except (ValueError, OSError):
        return 4096


#: a GPU model named in a file name: v100, a100, h100, p40, t4, l40s ... (not rtx4090)
_MODEL_IN_NAME = re.compile(r"(?<![a-z0-9])([kmptvalh]\d{1,3}s?)(?![a-z0-9])", re.IGNORECASE)


def model_from_file_name(path: str) -> str | None:
    """``V100`` for ``examples/topologies/dgx1-v100.txt``; ``None`` when none is named."""
    match = _MODEL_IN_NAME.search(Path(path).name.rsplit(".", 1)[0])
    return match.group(1).upper() if match else None


#: what a simulated machine offers per GPU at least: the shipped examples' share
#: (tensorflow-v100.yaml: 8 CPUs and 32 GiB for 2 GPUs), plus each executor's own
SIMULATED_PER_GPU = (4.0, 16384)


def default_resources(
    gpus: int, host_cpus: float, host_mem_mib: int, simulated: bool
) -> tuple[float, int]:
    """CPUs and MiB a local agent offers when ``--cpus``/``--mem`` are not given.

    This host: its own (a container cannot get more than the host has). A simulated
    machine: at least :data:`SIMULATED_PER_GPU` per GPU plus the executors' share, so
    that jobs asking for the examples' numbers fill all its GPUs, not just a few.
    """
    if not simulated:
        return host_cpus, host_mem_mib
    extra = PlacementConfig()
    cpus = max(host_cpus, gpus * (SIMULATED_PER_GPU[0] + extra.executor_cpus))
    mem = max(host_mem_mib, int(gpus * (SIMULATED_PER_GPU[1] + extra.executor_mem_mib)))
    return round(cpus, 2), mem


def with_model(topo, model: str | None):
    """``topo`` with ``model`` on every GPU that has none."""
    if not model:
        return topo
    return replace(topo, gpus=tuple(replace(g, model=g.model or model) for g in topo.gpus))


def agent_spec(config: LocalConfig, simulate: str | None = None):
    """The emulated agent of ``simulate`` (default: the first ``--simulate`` file, else this
    host): resources and attributes as
    ``dlc node-config`` prints them, and the environment its executors get.

    Raises:
        DiscoveryError: no topology file and no GPUs found on this host.
        TopologyParseError: the topology file is malformed.
    """
    from dlc.mesos.emulator.cluster import AgentSpec
    from dlc.topology.discovery.discover import discover
    from dlc.topology.node_config import node_config

    simulate = simulate or next(iter(config.simulate_files), None)
    if simulate:
        topo = discover(from_file=simulate)
    else:
        try:
            topo = discover()
        except DiscoveryError as exc:
            text = str(exc).replace("--from-file FILE", "--simulate FILE")
            raise DiscoveryError(f"{text} (e.g. examples/topologies/dgx1-v100.txt)") from None
    model = config.gpu_model or (model_from_file_name(simulate) if simulate else None)
    topo = with_model(topo, model)
    cpus, mem = default_resources(
        len(topo.gpus), float(os.cpu_count() or 2), host_memory_mib(), bool(simulate)
    )
    agent = node_config(
        topo,
        cpus=config.cpus or cpus,
        mem_mib=config.mem_mib or mem,
        gpu_mem_mib=config.gpu_mem_mib,
        # simulated NVIDIA GPUs run with DLC_GPU_STYLE=none: no MPS or watchdog limits any
        # share; AMD agents advertise none at all (node-config refuses a mode for them)
        sharing="none" if simulate and topo.vendor == "nvidia" else None,
    )
    env = simulated_executor_env(topo.vendor, config.device_root) if simulate else ()
    return AgentSpec(
        resources=agent.resources + ";disk:65536",
        attributes=agent.attributes_text,
        executor_env=env,
    ), topo


def pool_specs(config: LocalConfig) -> tuple[list, list]:
    """The emulated agents (``config.agents`` per simulated file, or this host's one) and
    the topology of each file, in order."""
    files = config.simulate_files or (None,)
    specs: list[AgentSpec] = []
    topologies: list[Topology | None] = []
    for simulate in files:
        spec, topo = agent_spec(config, simulate)
        specs += agent_specs(spec, config.agents, first=len(specs))
        topologies.append(topo)
    return specs, topologies


def local_os_error(exc: OSError, config: LocalConfig) -> DlcError:
    """One line for an OSError of ``dlc local``, naming the option that fixes it."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES) and not exc.filename:
        return DlcError(
            f"--api-port {config.api_port}: cannot listen ({reason}); "
            "pick another port, or 0 for any"
        )
    where = f" ({exc.filename})" if exc.filename else ""
    return DlcError(
        f"--work-dir {config.work_dir}: cannot use it: {reason}{where}; "
        "pass a writable directory with --work-dir DIR"
    )


def previous_framework_id(db_path: Path) -> str | None:
    """The framework id a previous ``dlc local`` run saved in its job database, if any."""
    if not db_path.is_file():
        return None
    from dlc.store.sqlite import JobStore

    store = JobStore(db_path)
    try:
        return store.framework_id
    finally:
        store.close()


def store_bootstrapped(db_path: Path) -> bool:
    """Whether the job database at ``db_path`` has had its first admin token registered."""
    if not db_path.is_file():
        return False
    from dlc.store.sqlite import JobStore

    store = JobStore(db_path)
    try:
        return bool(store.get_meta("bootstrapped"))
    finally:
        store.close()


def end_previous_run(db_path: Path) -> int:
    """End the executors and containers a previous run left (see the module docstring).

    Returns:
        How many containers were removed (0 when there was no previous run).

    Raises:
        ContainerError: Docker is unreachable while a previous run's containers may exist, or
            they would not go away.
    """
    framework_id = previous_framework_id(db_path)
    if not framework_id:
        return 0
    from dlc.errors import ContainerError
    from dlc.executor.reaper import end_framework_containers
    from dlc.executor.runtime import DockerRuntime

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        # no engine answering: no container of the previous run can run on it either
        log.warning("not checking for containers of the previous run: %s", exc)
        return 0
    removed = end_framework_containers(runtime, framework_id)
    if removed:
        log.warning("ended %d container(s) left running by the previous dlc local", removed)
    return removed


class LocalImageCheck:
    """Submit-time image check of ``dlc local``: its jobs run on this host's Docker engine,
    so an image that engine does not have is refused at submit (one line), not queued to
    fail at pull time, when its registry says it has not, or cannot be reached at all (no
    such host, connection refused: an offline laptop) and no mirror could serve it.

    An image the engine has, or one whose registry is slow to answer (the pull may still
    work), is accepted. Answers are kept a minute.
    """

    TTL_S = 60.0

    def __init__(
        self,
        runtime: DockerRuntime,
        resolver: ImageResolver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from dlc.scheduler.core.config import default_resolver

        self._runtime, self._resolver, self._clock = runtime, resolver or default_resolver, clock
        self._seen: dict[str, float] = {}

    #: images remembered at most (each submit may name a new one: the memory stays bounded)
    MAX_SEEN = 4096

    def __call__(self, spec):
        image, cuda = self._resolver(spec)
        if self._seen.get(image, -1e18) + self.TTL_S < self._clock():
            self._check(image)
            self._remember(image, self._clock())
        return image, cuda

    def _remember(self, image: str, now: float) -> None:
        if len(self._seen) >= self.MAX_SEEN:
            self._seen = {i: t for i, t in self._seen.items() if t + self.TTL_S >= now}
            if len(self._seen) >= self.MAX_SEEN:
                self._seen.clear()  # only saves probes: forgetting is safe
        self._seen[image] = now

    def _check(self, image: str) -> None:
        from dlc.errors import ImageNotFound
        from dlc.executor.runtime import explain_engine_error, registry_of

        if self._runtime.image_env(image) is not None:
            return
        errors = self._runtime._docker.errors
        try:
            self._runtime.client.api.inspect_distribution(image)
        except errors.APIError as exc:
            found = explain_engine_error(image, str(exc.explanation or exc))
            if isinstance(found, ImageNotFound):
                raise ImageNotFound(
                    f"image: {image} is not on this host's Docker engine and its registry "
                    "does not have it; check the name and tag (or build/pull it first)"
                ) from None
            cause = _unreachable(str(exc.explanation or exc))
            if cause and not self._mirrored(image):
                raise ImageNotFound(
                    f"image: {image} is not on this host's Docker engine and its registry "
                    f"{registry_of(image)} cannot be reached ({cause}); pull or load it on "
                    "this host first (docker pull, docker load), or check the name"
                ) from None
            log.info("not checking image %s at submit: %s", image, found)
        except Exception as exc:  # noqa: BLE001 - a slow registry (timeout) decides nothing
            log.info("not checking image %s at submit: %s", image, exc)

    def _mirrored(self, image: str) -> bool:
        """Whether the engine has registry mirrors that may serve ``image`` (Docker Hub's)."""
        from dlc.executor.runtime import registry_of

        if registry_of(image) != "docker.io":
            return False  # the engine mirrors Docker Hub only
        try:
            mirrors = (self._runtime.client.info().get("RegistryConfig") or {}).get("Mirrors")
        except Exception:  # noqa: BLE001 - cannot tell: do not refuse
            return True
        return bool(mirrors)


#: engine answers meaning the registry cannot be reached at all (not merely slow)
_UNREACHABLE = ("no such host", "connection refused", "network is unreachable")


def _unreachable(text: str) -> str | None:
    """The words of ``text`` saying its registry cannot be reached, or None (a timeout,
    or anything else, may pass on a later try)."""
    lowered = text.lower()
    if "timeout" in lowered or "timed out" in lowered:
        return None
    return next((cause for cause in _UNREACHABLE if cause in lowered), None)


#: seconds a submit waits for the engine to ask the image's registry
CHECK_TIMEOUT_S = 5.0


def image_check(config: LocalConfig):
    """The submit-time resolver of ``dlc local``: :class:`LocalImageCheck` when its jobs
    run real containers on a reachable engine, else ``None`` (the default resolver)."""
    if config.executor_command is not None:
        return None  # a stand-in executor (tests, debugging) runs no image
    import docker

    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime

    try:
        # a short timeout: the check runs inside a submit, and an offline registry must
        # not hold it for the engine's full pull timeout
        return LocalImageCheck(DockerRuntime(docker.from_env(timeout=int(CHECK_TIMEOUT_S))))
    except (ContainerError, docker.errors.DockerException):
        return None  # no engine here: the executor says so when it starts


class LocalCluster:
    """A running ``dlc local`` (emulator + scheduler + API)."""

    def __init__(self, config: LocalConfig):
        self.config = config
        self.emulator: MesosEmulator | None = None
        self.service: SchedulerService | None = None
        self.topology = None  # the first agent's (this host's, or the first --simulate file's)
        #: each simulated file's topology, in --simulate order ([this host's] without one)
        self.topologies: list = []
        self.admin_token: str | None = None
        self.token_is_new = False
        self.ended_leftovers = 0

    def start(self, timeout_s: float = 30.0) -> LocalCluster:
        """Start everything and wait until the framework is registered.

        Whatever fails, whatever was already started (emulator threads and executor
        processes, the API, the job database) is stopped before the error is raised.

        Raises:
            DlcError: something did not come up in time, or a port or the work
                directory cannot be used (the message names the option to change).
        """
        try:
            self._start(timeout_s)
        except BaseException as exc:  # Ctrl-C included: nothing half-started may linger
            self.stop()
            if isinstance(exc, OSError):
                raise local_os_error(exc, self.config) from None
            raise
        return self

    def _start(self, timeout_s: float) -> None:
        from dlc.mesos.emulator.cluster import MesosEmulator

        work = private_dir(Path(self.config.work_dir).resolve())
        specs, self.topologies = pool_specs(self.config)
        specs = without_loopback_guard(with_state_dir(specs, work))
        self.topology = self.topologies[0]
        self.ended_leftovers = end_previous_run(work / "scheduler.db")
        # a host-network job shares loopback with the emulator: only DLC may be its framework
        credential = ("dlc", secrets.token_urlsafe(24))
        self.emulator = MesosEmulator(
            agents=specs,
            work_dir=work / "mesos",
            port=self.config.mesos_port,
            framework_credential=credential,
        ).start()
        token_path = work / "admin.token"
        first_token = self._first_token(work / "scheduler.db", token_path)
        service_config = ServiceConfig(
            master=self.emulator.address,
            framework=FrameworkConfig(
                master=self.emulator.address, principal=credential[0], secret=credential[1]
            ),
            db=str(work / "scheduler.db"),
            api_port=self.config.api_port,
            policy=self.config.policy,
            allowed_volumes=self.config.allowed_volumes,
            sandbox_roots=(str(work / "mesos"),),
            admin_token=self.config.admin_token or first_token,
            # simulated agents' executors get their vendor and GPU style from the agent
            executor=ExecutorConfig(command=self.config.executor_command),
            sessions=self.config.sessions,
            share_hold=self.config.share_hold,
        )
        self.service = SchedulerService(service_config, resolver=image_check(self.config))
        self.service.start()
        if not self.service.framework.registered.wait(timeout_s):
            raise DlcError(f"the scheduler did not register with the emulator in {timeout_s:g} s")
        self.admin_token = self._remember_token(token_path)

    def _first_token(self, db_path: Path, path: Path) -> str | None:
        """The admin token to register when the store has none yet, saved BEFORE it is.

        The service registers the token it is given as soon as it opens the store, before
        it binds the API port; a start that fails after that (the port is taken) must not
        leave a token in the store that nobody has. So the token is made here and written
        to ``admin.token`` first; a later start finds the file and registers the same one.
        """
        from dlc.app.service import write_token_file

        if self.config.admin_token or store_bootstrapped(db_path):
            return None
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        token = secrets.token_urlsafe(24)
        write_token_file(path, token)
        return token

    def _remember_token(self, path: Path) -> str | None:
        """The admin token: new ones are saved in the work dir, later runs read it back."""
        from dlc.app.service import write_token_file

        assert self.service is not None  # start() made it
        token = self.service.admin_token
        #: whether this start registered the admin token (only then is it printed: a token
        #: the operator passed, or one an earlier start registered, stays out of service logs)
        self.token_is_new = bool(token) and self.config.admin_token is None
        if token:
            write_token_file(path, token)
            return token
        return path.read_text().strip() if path.is_file() else None

    def stop(self) -> None:
        """Stop the scheduler (no teardown) and the emulator (kills its processes)."""
        if self.service is not None:
            self.service.stop()
            self.service = None
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None

    def wait(self, interval_s: float = 1.0) -> None:
        """Sleep until interrupted (the work happens in background threads)."""
        while True:
            time.sleep(interval_s)
