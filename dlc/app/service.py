"""Wiring of one running scheduler: store + core + Mesos framework + HTTP API.

``dlc scheduler`` and ``dlc local`` both build a :class:`SchedulerService`;
tests build one against the emulator or the real master.
"""

from __future__ import annotations

import gc
import logging
import os
import secrets
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlc import __version__
from dlc.api.logs import LogReader
from dlc.api.metrics import SchedulerMetrics
from dlc.api.server import ApiServer, ServerLimits
from dlc.api.shell_relay import SessionLimits
from dlc.app.advertise import advertised_api_url, loopback_warning
from dlc.mesos.codec import MesosCodec
from dlc.mesos.framework import FrameworkConfig, MesosFramework, framework_roles
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.launch_spec import DEFAULT_CONTAINER_USER, TaskPolicy
from dlc.scheduler.placement.model import PlacementConfig, check_policy
from dlc.scheduler.placement.round_cap import DEFAULT_JOBS_PER_ROUND
from dlc.scheduler.placement.share_hold import ShareHoldSettings
from dlc.scheduler.tasks.launch import ExecutorConfig
from dlc.scheduler.tenancy.billing import BillingWeights
from dlc.scheduler.tenancy.fair_share import DEFAULT_HALF_LIFE_S
from dlc.scheduler.tenancy.preemption import ProtectionRules
from dlc.store.lock import DbLock
from dlc.store.select import is_postgres_url, open_store
from dlc.web.dashboard import Dashboard

if TYPE_CHECKING:  # kazoo is imported only with --zk
    from dlc.app.leader import LeaderElection

log = logging.getLogger(__name__)


@dataclass
class ServiceConfig:
    """Everything ``dlc scheduler`` takes.

    Attributes:
        master: Mesos master ``host:port`` or ``zk://...``.
        db: SQLite file of the job store.
        api_host, api_port: where the API listens (port 0: any free port).
        api_advertise_url: the API as agents reach it (``--api-advertise-url``; ``None``:
            the bound address): executors fetch ``--workdir`` snapshots from it.
        policy: allocator policy.
        allowed_volumes: host path prefixes jobs may mount.
        sandbox_roots: local agent work dirs to read logs from.
        admin_token: admin token to register (else one is made on first start).
        framework: registration settings (master is filled from ``master``).
        executor: how executors start (e.g. extra environment).
        container_user, allow_root, allowed_registries, allow_job_user: container security
            settings (``--container-user``, ``--allow-root``, ``--allow-registry``,
            ``--allow-job-user``), carried to and enforced on agents.
    """

    master: str
    db: str = "dlc-scheduler.db"
    api_host: str = "127.0.0.1"
    api_port: int = 8642
    api_advertise_url: str | None = None
    policy: str = "tree"
    allowed_volumes: tuple[str, ...] = ()
    sandbox_roots: tuple[str, ...] = ()
    admin_token: str | None = None
    framework: FrameworkConfig | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    max_skips: int = 20
    container_user: str = DEFAULT_CONTAINER_USER
    allow_root: bool = False
    allowed_registries: tuple[str, ...] = ()
    allow_job_user: bool = False
    #: HA: ``zk://HOSTS/PATH`` of the leader election (``None``: this instance always leads)
    zk: str | None = None
    #: per-user and per-job GPU usage on /metrics (dlc/api/metrics.py)
    metrics_tenant_labels: bool = False
    #: queued jobs one (non-admin) user may have (0: no cap); ``--max-queued-per-user``
    max_queued_per_user: int = 1000
    #: open API connections per client address (0: no cap) and in all
    max_connections_per_ip: int = 64
    max_connections: int = 4096
    #: caps on ``dlc shell``/``dlc exec`` sessions at once, and a shell's idle/maximum time
    sessions: SessionLimits = field(default_factory=SessionLimits)
    #: the opt-in share hold (``--share-hold-*``, docs/sharing.md); off by default
    share_hold: ShareHoldSettings = field(default_factory=ShareHoldSettings)
    #: jobs consolidation may move per hour (``--consolidation-moves-per-hour``; 0: off)
    consolidation_moves_per_hour: int = 0
    #: queued jobs one offer round considers (``--max-jobs-per-round``; ``None``: all)
    max_jobs_per_round: int | None = DEFAULT_JOBS_PER_ROUND
    #: ``--fair-share-half-life`` (0: off) and ``--protect`` (docs/quotas.md)
    fair_share_half_life_s: float = DEFAULT_HALF_LIFE_S
    #: ``--fair-share-billing`` (default: the cluster's CPUs and memory per GPU)
    fair_share_billing: BillingWeights = field(default_factory=BillingWeights)
    protection: ProtectionRules = field(default_factory=ProtectionRules)

    def __post_init__(self) -> None:
        check_policy(self.policy)  # refuse a typo at configuration time, not at first offer
        self.task_policy().check()

    def task_policy(self) -> TaskPolicy:
        """The security settings every task carries to its agent, which enforces them."""
        return TaskPolicy(
            self.allowed_volumes,
            self.container_user,
            self.allow_root,
            self.allowed_registries,
            self.allow_job_user,
        )


class SchedulerService:
    """A running DLC scheduler (call :meth:`start`, then :meth:`stop`)."""

    def __init__(self, config: ServiceConfig, resolver=None, driver_factory=None):
        self.config = config
        host = f"[{config.api_host}]" if ":" in config.api_host else config.api_host
        advertised_api_url(f"http://{host}:{config.api_port}", config.api_advertise_url)
        # One scheduler per DB: a second one exits here, before touching anything. With
        # --zk several instances share the DB and the leader epoch fences them instead.
        local = config.db != ":memory:" and not is_postgres_url(config.db) and not config.zk
        self._db_lock = DbLock(config.db).acquire() if local else None
        self.election: LeaderElection | None = None
        try:
            self.store = open_store(config.db)
        except BaseException:
            self._release_lock()
            raise
        self.admin_token = self._bootstrap_token(config.admin_token)
        fw_config = config.framework or FrameworkConfig(master=config.master)
        core_config = CoreConfig(
            placement=PlacementConfig(policy=config.policy, share_hold=config.share_hold),
            executor=replace(config.executor, policy=config.task_policy()),
            allowed_volumes=config.allowed_volumes,
            max_skips=config.max_skips,
            max_queued_per_user=config.max_queued_per_user or None,
            roles=tuple(r for r in framework_roles(fw_config) if r != "*"),
            reserve_idle_s=fw_config.unreserve_after_s if fw_config.reserve else None,
            principal=fw_config.principal,
            group_roles=fw_config.group_roles,
            consolidation_moves_per_hour=config.consolidation_moves_per_hour,
            max_jobs_per_round=config.max_jobs_per_round,
            fair_share_half_life_s=config.fair_share_half_life_s,
            fair_share_billing=config.fair_share_billing,
            protection=config.protection,
        )
        self.metrics = SchedulerMetrics(tenant_labels=config.metrics_tenant_labels)
        self.core = SchedulerCore(
            self.store, core_config, resolver, metrics=self.metrics, codec=MesosCodec()
        )
        # the jobs just loaded live as long as the process: out of the collector's full
        # scans, which were a fifth of an offer round at openb scale (docs/scheduler.md)
        gc.freeze()
        self.dashboard = Dashboard(self.core, self.metrics, self._dashboard_info)
        try:
            self.api = ApiServer(
                self.core,
                LogReader(lambda: self.core.framework_id, self._master_url, config.sandbox_roots),
                self._dispatch,
                config.api_host,
                config.api_port,
                framework_url=lambda: self.framework.framework_url(),
                master_kind=lambda: self.framework.master_kind,
                web=self.dashboard,
                limits=ServerLimits(
                    max_connections=config.max_connections,
                    max_connections_per_ip=config.max_connections_per_ip,
                ),
            )
        except BaseException:  # the port is taken: do not leave the database open
            self.store.close()
            self._release_lock()
            raise
        #: the API as agents and users reach it (checked above, now with the bound port)
        self.advertised_url = advertised_api_url(self.api.url, config.api_advertise_url)
        self._wire_env_routes(config)
        if fw_config.webui_url is None:
            fw_config = _with_webui(fw_config, self.advertised_url + "/")
        self.framework = MesosFramework(self.core, fw_config, driver_factory)
        #: called once when this instance loses its leadership (the CLI exits then)
        self.on_step_down = lambda why: None

    def _wire_env_routes(self, config: ServiceConfig) -> None:
        """Snapshots live in ``<db>.blobs``; each job's secret derives from a key kept in the
        DB (so it survives restarts); tasks learn where the API is (docs/environments.md)."""
        if config.db == ":memory:":
            return
        from dlc.api.env_routes import EnvContext
        from dlc.api.shell_relay import SessionGate
        from dlc.store.blobs import BlobStore

        key = self.store.get_meta("job_secret_key")
        if not key:
            key = secrets.token_hex(32)
            self.store.set_meta("job_secret_key", key)
        gate = SessionGate(config.sessions)
        self.api.env = EnvContext(BlobStore(f"{config.db}.blobs"), key, gate)
        executor = replace(self.core.config.executor, api_url=self.advertised_url, job_key=key)
        self.core.config = replace(self.core.config, executor=executor)

    def _release_lock(self) -> None:
        if self._db_lock is not None:
            self._db_lock.release()

    def _bootstrap_token(self, token: str | None) -> str | None:
        """Register the given admin token; on an empty store make one so someone can log in."""
        if token:
            self.store.add_token("admin", admin=True, token=token)
            self.store.set_meta("bootstrapped", "1")
            return token
        if self.store.get_meta("bootstrapped"):
            return None
        self.store.set_meta("bootstrapped", "1")
        return self.store.add_token("admin", admin=True)

    def _dashboard_info(self) -> dict:
        return {
            "version": __version__,
            "framework_name": self.framework.config.name,
            "framework_id": self.core.framework_id,
            "framework_url": self.framework.framework_url(),
            "master_url": self.framework.master_url,
            "master_kind": self.framework.master_kind,
            "registered": self.framework.registered.is_set(),
        }

    def _master_url(self) -> str | None:
        return self.framework.master_url

    def _dispatch(self, actions) -> None:
        self.framework.dispatch(actions)

    @property
    def api_url(self) -> str:
        """Where the API answers, as agents and users reach it (``--api-advertise-url``)."""
        return self.advertised_url

    def start(self) -> None:
        """Start the API and the framework (both in background threads).

        With ``zk`` the framework starts only once this instance wins the election
        (:mod:`dlc.app.leader`); until then it stands by and its API redirects.
        """
        if self.config.zk:
            from dlc.app.leader import LeaderElection

            self.election = LeaderElection(
                self.config.zk, self.advertised_url, self._elected, self._lost_leadership
            )
        warning = loopback_warning(self.advertised_url, self.config.master)
        if warning:
            log.warning(warning)
        # /v1/health answers on every instance, a single one too (the dashboard reads it)
        self.api.leadership = self.role
        self.api.start()
        self.dashboard.start()
        if self.election is None:
            self.framework.start()
        else:
            # pymesos installs a signal handler when imported, which only the main thread
            # may do; the framework starts later, in the election thread.
            from dlc.mesos import import_pymesos

            import_pymesos()
            self.election.start()

    # -- HA (docs/ha.md) -------------------------------------------------------

    def role(self) -> dict:
        """Who leads: this instance or which other one (``/v1/health``, the dashboard)."""
        if self.election is None:
            return {"leading": True, "leader_url": self.advertised_url, "instance": "single"}
        leading = self.election.leading.is_set()
        leader = None if leading else self.election.leader()
        return {
            "leading": leading,
            "leader_url": self.advertised_url if leading else (leader or {}).get("api_url"),
            "leader": self.election.instance_id if leading else (leader or {}).get("id"),
            "instance": self.election.instance_id,
            "epoch": getattr(self.store, "_fence", None),
        }

    def _elected(self) -> None:
        """Won the election: fence out older leaders, re-read the store, register."""
        epoch = self.store.claim_epoch()
        log.info("leading with epoch %d; registering as framework %s", epoch,
                 self.store.framework_id or "(new)")  # fmt: skip
        self.core.reload()
        self.framework.start()

    def _lost_leadership(self, why: str) -> None:
        """The ZooKeeper session is suspended or lost: stop acting at once."""
        self.store.fence()  # no write from here on, whatever thread tries
        threading.Thread(target=self._step_down, args=(why,), daemon=True).start()

    def _step_down(self, why: str) -> None:
        self.framework.stop()
        self.on_step_down(why)

    def stop(self) -> None:
        """Stop without tearing down the framework (tasks keep running)."""
        if self.election is not None:
            self.store.fence()
        self.framework.stop()
        if self.election is not None:  # after the driver: the next leader finds it gone
            self.election.stop()
        self.dashboard.stop()
        self.api.stop()
        self.store.close()
        self._release_lock()


def _with_webui(config: FrameworkConfig, url: str) -> FrameworkConfig:
    from dataclasses import replace

    return replace(config, webui_url=url)


def write_token_file(path: str | Path, token: str) -> None:
    """Write a token readable only by the owner (an existing file is made private first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_mode & 0o077:
        log.warning("%s was readable by other users; making it private (mode 600)", path)
    # Created 0600 from the start: no moment in which another user could open it.
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    path.chmod(0o600)
    path.write_text(token + "\n")


def private_dir(path: str | Path) -> Path:
    """Create ``path`` mode 0700 (or tighten it): it holds the job DB, tokens and sandboxes."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        log.info("making %s private (mode 700): it holds the job database and tokens", path)
        path.chmod(0o700)
    return path
