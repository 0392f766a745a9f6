"""The pymesos adapter: DLC's Mesos framework around :class:`SchedulerCore`.

pymesos calls its ``Scheduler`` callbacks on its I/O thread, and an exception
there aborts the driver. So :class:`_Callbacks` only records events (every
body guarded) and one worker thread does everything else in order: persisting
the framework id, placement, status updates, acknowledgements, reconciliation,
API requests (revive on submit, kills). Only that worker calls the driver.

Robustness rules carried out here:

* the framework id is stored before it is used and passed back on restart,
  with a ``failover_timeout`` of a week (configurable), so running tasks
  survive a scheduler restart; stopping never tears the framework down;
* explicit reconciliation of every task that may be alive after each
  (re)registration, repeated with backoff until the master has answered;
* status updates are acknowledged only after the new state is stored;
* a missed-heartbeat watchdog: no event for ``heartbeat_misses`` heartbeat
  intervals (or an aborted driver) restarts the driver, which resubscribes
  with the same framework id;
* ``GPU_RESOURCES`` and ``PARTITION_AWARE`` capabilities (an agent cut off for a
  while reports ``TASK_UNREACHABLE``, which leaves the job running, instead of
  ``TASK_LOST`` and a kill when it comes back); ``checkpoint`` so that an agent
  restart recovers our executors; optional principal/secret;
* agent totals (``GET /master/slaves``) are read after each (re)registration and
  every ``agents_refresh_s`` and handed to the core for admission;
* requested kills are re-sent after each (re)registration and every
  ``kill_resend_s`` until the tasks are over (a kill accepted just before a crash
  is carried out after the restart);
* declines carry a refuse filter; offers are suppressed while the queue is
  empty and revived on submit or retry.
"""

from __future__ import annotations

import getpass
import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dlc.errors import ConfigError, DlcError
from dlc.mesos.emulator.model import EMULATOR_BUILD_USER
from dlc.mesos.master import fetch_slaves, fetch_version
from dlc.mesos.status import reconcile_request
from dlc.scheduler.core.facade import Actions, SchedulerCore

log = logging.getLogger(__name__)

WEEK_S = 7 * 24 * 3600.0
#: the least time between two reconciliations that refused updates ask for: each malformed
#: update used to send one at once, with every unconfirmed task, so a flood of them was a
#: flood of ever larger requests to the master (red-team #48)
RECONCILE_GAP_S = 1.0


@dataclass(frozen=True)
class FrameworkConfig:
    """How the framework registers and behaves.

    Attributes:
        master: ``host:port`` or ``zk://...`` of the Mesos master.
        name: framework name shown in the Mesos UI.
        user: Unix user tasks run as (default: the current user).
        role: Mesos role (one role, the pre-``MULTI_ROLE`` way; ``roles`` wins when given).
        roles: Mesos roles DLC subscribes with (``MULTI_ROLE``; ``docs/roles.md``).
        reserve: keep the GPUs DLC uses dynamically reserved for its role (``--reserve``).
        unreserve_after_s: a reserved GPU unused this long in DLC's offers is released.
        group_roles: ``(group, role)`` pairs: a DLC group's jobs use only that role's offers.
        principal, secret: optional framework authentication.
        failover_timeout_s: how long Mesos keeps our tasks while we are away.
        refuse_seconds: decline filter: do not re-offer a declined agent for this long.
        heartbeat_interval_s: the master's heartbeat interval (Mesos: 15 s).
        heartbeat_misses: intervals without any event before the watchdog resubscribes.
        webui_url: DLC's status page (linked from the Mesos UI).
        agents_refresh_s: how often agent totals are re-read from the master.
        kill_resend_s: how often requested kills of still-live tasks are sent again.
    """

    master: str
    name: str = "dlc"
    user: str = ""
    role: str = "*"
    roles: tuple[str, ...] = ()
    reserve: bool = False
    unreserve_after_s: float = 300.0
    group_roles: tuple[tuple[str, str], ...] = ()
    principal: str | None = None
    secret: str | None = None
    failover_timeout_s: float = WEEK_S
    refuse_seconds: float = 5.0
    heartbeat_interval_s: float = 15.0
    heartbeat_misses: int = 5
    webui_url: str | None = None
    agents_refresh_s: float = 60.0
    kill_resend_s: float = 10.0


def framework_info(config: FrameworkConfig, framework_id: str | None) -> dict[str, Any]:
    """The v1 ``FrameworkInfo`` DLC subscribes with (pure; tested as exact JSON)."""
    roles = framework_roles(config)
    info: dict[str, Any] = {
        "user": config.user or getpass.getuser(),
        "name": config.name,
        "hostname": socket.gethostname(),
        "failover_timeout": config.failover_timeout_s,
        "checkpoint": True,
        "capabilities": [{"type": "GPU_RESOURCES"}, {"type": "PARTITION_AWARE"}],
    }
    if roles == ("*",):
        info["role"] = "*"  # the default role: the plain single-role form every master takes
    else:
        # MULTI_ROLE: offers name the role they are allocated to (allocation_info), which a
        # task's resources must echo; RESERVATION_REFINEMENT lets the master send
        # ``reservations`` (a stack) rather than the older role/reservation pair, and lets
        # --reserve refine a static reservation of a parent role.
        info["roles"] = list(roles)
        info["capabilities"] += [{"type": "MULTI_ROLE"}, {"type": "RESERVATION_REFINEMENT"}]
    if config.webui_url:
        info["webui_url"] = config.webui_url
    if config.principal:
        info["principal"] = config.principal
    if framework_id:
        info["id"] = {"value": framework_id}
    return info


_ROLE_BAD = re.compile(r"\s|//|^/|/$|^-|^\.\.?$|/\.\.?(/|$)|^\.\.?/")


def check_roles(roles: Iterable[str]) -> tuple[str, ...]:
    """``--role`` values checked as Mesos checks role names (``roles::validate``).

    Raises:
        ConfigError: an empty or malformed name, or ``*`` beside other roles.
    """
    roles = tuple(dict.fromkeys(r.strip() for r in roles))
    for role in roles:
        if not role or (role != "*" and ("*" in role or _ROLE_BAD.search(role))):
            raise ConfigError(
                "role",
                f"{role!r} is not a Mesos role name (no spaces, no leading '-' or '/', no '.' "
                "or '..' parts, no '*'); pass e.g. --role dlc or --role eng/dlc",
            )
    if "*" in roles and len(roles) > 1:
        raise ConfigError("role", "'*' cannot be combined with other roles; drop --role '*'")
    return roles


def parse_group_roles(pairs: Iterable[str], roles: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``--group-role GROUP=ROLE`` values, each role one of ``roles``.

    Raises:
        ConfigError: not ``GROUP=ROLE``, or a role DLC does not subscribe with.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        group, eq, role = pair.partition("=")
        if not eq or not group.strip() or not role.strip():
            raise ConfigError("group-role", f"{pair!r} is not GROUP=ROLE, e.g. vision=dlc-vision")
        if role.strip() not in roles:
            known = ", ".join(r for r in roles if r != "*") or "none"
            raise ConfigError(
                "group-role",
                f"role {role.strip()!r} of group {group.strip()!r} is not one of --role "
                f"({known}); add --role {role.strip()}",
            )
        out[group.strip()] = role.strip()
    return tuple(out.items())


def framework_roles(config: FrameworkConfig) -> tuple[str, ...]:
    """The roles DLC subscribes with: ``roles``, else ``(role,)``, without repeats."""
    return tuple(dict.fromkeys(config.roles or (config.role,)))


class _Callbacks:
    """pymesos ``Scheduler`` interface: camelCase stays in here, bodies only enqueue."""

    def __init__(self, events: queue.Queue, touch: Callable[[], None]):
        self._events = events
        self._touch = touch

    def _put(self, *event: Any) -> None:
        try:
            self._touch()
            self._events.put(event)
        except Exception:  # never let pymesos's I/O thread die of us
            log.exception("dropping Mesos event %s", event[:1])

    def registered(self, driver, framework_id, master_info):
        self._put("registered", framework_id.get("value"), dict(master_info or {}))

    def reregistered(self, driver, master_info):
        self._put("registered", None, dict(master_info or {}))

    def disconnected(self, driver):
        self._put("disconnected")

    def resourceOffers(self, driver, offers):  # noqa: N802 - pymesos interface
        self._put("offers", [dict(o) for o in offers])

    def inverseOffers(self, driver, offers):  # noqa: N802
        self._put("noop")

    def offerRescinded(self, driver, offer_id):  # noqa: N802
        self._put("noop")

    def statusUpdate(self, driver, status):  # noqa: N802
        self._put("status", dict(status))

    def frameworkMessage(self, driver, executor_id, agent_id, data):  # noqa: N802
        # the executors' GPU usage reports (dlc/executor/usage.py)
        self._put("message", (agent_id or {}).get("value", ""), data)

    def slaveLost(self, driver, agent_id):  # noqa: N802
        self._put("noop")  # the master follows with TASK_LOST/UNREACHABLE updates

    def executorLost(self, driver, executor_id, agent_id, status):  # noqa: N802
        self._put("noop")

    def error(self, driver, message):
        self._put("error", str(message))

    def processHeartBeat(self, driver):  # noqa: N802
        self._touch()


class MesosFramework:
    """Runs the DLC framework: a pymesos driver, its callbacks and the worker thread.

    Args:
        core: the scheduler core.
        config: registration and behaviour settings.
        driver_factory: ``(callbacks, framework_info, master, principal, secret) -> driver``
            (default: pymesos's ``MesosSchedulerDriver``; tests pass a fake).
        clock: monotonic time source.
        version_probe: master URL -> its ``/version`` JSON, or ``None`` when it does not
            answer (default: an HTTP GET); tells DLC's emulator from a real master.
        agents_probe: master URL -> the ``slaves`` list of ``/master/slaves``, or ``None``
            when it does not answer (default: an HTTP GET).
    """

    def __init__(
        self,
        core: SchedulerCore,
        config: FrameworkConfig,
        driver_factory: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        version_probe: Callable[[str], dict | None] | None = None,
        agents_probe: Callable[[str], list[dict] | None] | None = None,
    ):
        self.core = core
        self._version_probe = version_probe or fetch_master_version
        self._agents_probe = agents_probe or fetch_master_agents
        self._agents_at = 0.0
        self._kills_at = 0.0
        #: ``"emulator"`` (DLC's Mesos emulator) or ``"mesos"``; ``None`` until registered
        self.master_kind: str | None = None
        self.config = config
        self._factory = driver_factory or _pymesos_driver
        self._clock = clock
        self._events: queue.Queue = queue.Queue()
        self._callbacks = _Callbacks(self._events, self._touch)
        self._last_event = clock()
        self._driver: Any = None
        self._worker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.master_info: dict[str, Any] = {}
        self.registered = threading.Event()
        self._unconfirmed: dict[str, str] = {}
        self._reconcile_at = 0.0
        #: when the last reconcileTasks was sent
        self._reconciled_at = -RECONCILE_GAP_S
        self._reconcile_backoff = 5.0
        self._restart_at = 0.0
        self._restart_backoff = 2.5
        #: roles suppressed one by one (``--group-role``) since the last revive
        self._suppressed_roles: tuple[str, ...] = ()

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Start the driver and the worker thread (returns at once)."""
        self._start_driver()
        self._worker = threading.Thread(target=self._work, name="dlc-framework", daemon=True)
        self._worker.start()

    def stop(self) -> None:
        """Stop without tearing down: running tasks keep running for failover."""
        self._stopping.set()
        self._events.put(("stop",))
        if self._worker:
            self._worker.join(timeout=10)
        self._stop_driver()

    def dispatch(self, actions: Actions) -> None:
        """Queue actions from another thread (the API) for the worker."""
        self._events.put(("actions", actions))

    @property
    def master_url(self) -> str | None:
        """``http://host:port`` of the master we are registered with."""
        if not self.master_info.get("hostname"):
            return None
        return f"http://{self.master_info['hostname']}:{self.master_info.get('port', 5050)}"

    def framework_url(self) -> str | None:
        """The Mesos UI page of this framework (the emulator's own page for the emulator,
        which has no Mesos web UI)."""
        fid, master = self.core.framework_id, self.master_url
        if not fid or not master:
            return None
        if self.master_kind == "emulator":
            return f"{master}/#framework-{fid}"
        return f"{master}/#/frameworks/{fid}"

    def _start_driver(self) -> None:
        info = framework_info(self.config, self.core.framework_id)
        self._driver = self._factory(
            self._callbacks, info, self.config.master, self.config.principal, self.config.secret
        )
        self._last_event = self._clock()
        self._driver.start()

    def _stop_driver(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            try:
                driver.stop(failover=True)
            except Exception:  # already dead: nothing to tear down
                log.exception("stopping the Mesos driver failed")

    def _touch(self) -> None:
        self._last_event = self._clock()

    # -- the worker -----------------------------------------------------------

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                event = self._events.get(timeout=1.0)
            except queue.Empty:
                event = ("tick",)
            try:
                self._handle(event)
            except DlcError as exc:  # e.g. the job DB is full: the status stays unacknowledged
                log.error("handling %s failed: %s", event[0], exc)
            except Exception:  # one bad event must not stop the scheduler
                log.exception("handling %s failed", event[0])

    def _handle(self, event: tuple) -> None:
        kind = event[0]
        if kind == "registered":
            self._on_registered(event[1], event[2])
        elif kind == "offers":
            self._carry_out(self.core.on_offers(event[1]))
        elif kind == "status":
            self._on_status(event[1])
        elif kind == "actions":
            self._carry_out(event[1])
        elif kind == "message":
            self.core.on_usage(event[1], event[2])
        elif kind == "error":
            self._on_error(event[1])
        elif kind == "disconnected":
            self.registered.clear()
            log.warning("disconnected from the Mesos master; pymesos reconnects")
        self._tick()

    def _on_registered(self, framework_id: str | None, master_info: dict) -> None:
        self._restart_backoff = 2.5
        if framework_id:
            self.core.set_framework_id(framework_id)  # stored before anything uses it
        self.master_info = master_info
        self.master_kind = _kind_of(
            self._version_probe(self.master_url) if self.master_url else None
        )
        log.info(
            "registered as %s with %s (%s)",
            self.core.framework_id,
            self.master_url,
            self.master_kind,
        )
        self.registered.set()
        tasks = self.core.reconcile_tasks()
        self._unconfirmed = {t["task_id"]["value"]: t["agent_id"]["value"] for t in tasks}
        self._reconcile_backoff = 5.0
        self._reconcile(tasks)
        self._refresh_agents()
        self._resend_kills()
        wants = self.core.wants_offers()  # a queued job, or an elastic gang that may grow
        self._carry_out(Actions(revive=wants, suppress=not wants))

    def _refresh_agents(self) -> None:
        """Hand the master's agent totals to the core (kept as they were on no answer)."""
        self._agents_at = self._clock() + self.config.agents_refresh_s
        slaves = self._agents_probe(self.master_url) if self.master_url else None
        if slaves is not None:
            self.core.update_agents(slaves)

    def _resend_kills(self) -> None:
        self._kills_at = self._clock() + self.config.kill_resend_s
        self._carry_out(self.core.pending_kills())

    def _on_status(self, status: dict) -> None:
        actions = self.core.on_status(status)  # stored first ...
        self._unconfirmed.pop(status.get("task_id", {}).get("value", ""), None)
        if status.get("uuid") and self._driver is not None:
            self._driver.acknowledgeStatusUpdate(status)  # ... then acknowledged
        self._carry_out(actions)

    def _on_error(self, message: str) -> None:
        log.error("Mesos master error: %s", message)
        if "removed" in message.lower() or "not found" in message.lower():
            # Our framework id is gone (failover timeout passed): register afresh.
            self.core.set_framework_id(None)
            self._restart_driver()

    def _reconcile(self, tasks: list[dict]) -> None:
        if self._driver is not None:
            self._driver.reconcileTasks(tasks)
        self._reconciled_at = self._clock()
        self._reconcile_at = self._reconciled_at + self._reconcile_backoff

    def _tick(self) -> None:
        now = self._clock()
        if self.registered.is_set() and now >= self._agents_at:
            self._refresh_agents()
        if self.registered.is_set() and now >= self._kills_at:
            self._resend_kills()
        if self._unconfirmed and self.registered.is_set() and now >= self._reconcile_at:
            # Mesos's advice: repeat explicit reconciliation with backoff until answered.
            self._reconcile_backoff = min(self._reconcile_backoff * 2, 120.0)
            self._reconcile(reconcile_request(self._unconfirmed.items()))
        silent = now - self._last_event
        limit = self.config.heartbeat_interval_s * self.config.heartbeat_misses
        aborted = self._driver is not None and getattr(self._driver, "aborted", False)
        if aborted and now >= self._restart_at:
            # A dead driver (refused subscription, protocol error): retry with backoff.
            self._restart_backoff = min(self._restart_backoff * 2, 60.0)
            self._restart_at = now + self._restart_backoff
            log.warning("the Mesos driver stopped; restarting it")
            self._restart_driver()
        elif silent > limit and not aborted:
            log.warning("no event from the master for %.0f s; resubscribing", silent)
            self._restart_driver()

    def _restart_driver(self) -> None:
        self.registered.clear()
        self._stop_driver()
        self._start_driver()

    def _carry_out(self, actions: Actions) -> None:
        driver = self._driver
        if driver is None:
            return
        pre = dict(actions.operations)
        refuse = {"refuse_seconds": self.config.refuse_seconds}
        for alone_ids, alone_ops in pre.items():  # offers with operations and no launch
            if not any(tuple(ids) == alone_ids for ids, _ in actions.accepts):
                driver.acceptOffers([{"value": o} for o in alone_ids], alone_ops, refuse)
        for offer_ids, task_infos in actions.accepts:
            operations = pre.get(tuple(offer_ids))
            if operations:  # --reserve: RESERVE/UNRESERVE, then the launch, in one ACCEPT
                launch = {"type": "LAUNCH", "launch": {"task_infos": task_infos}}
                driver.acceptOffers([{"value": o} for o in offer_ids], [*operations, launch])
            else:
                driver.launchTasks([{"value": o} for o in offer_ids], task_infos)
            # pymesos silently drops calls while reconnecting: a launched task stays
            # unconfirmed until an update names it, and reconciliation asks after it.
            for info in task_infos:
                self._unconfirmed[info["task_id"]["value"]] = info["agent_id"]["value"]
            self._reconcile_at = max(self._reconcile_at, self._clock() + 10.0)
        if actions.declines:
            # jobs the round cap left for the next round: the offers come back at once
            wait = 0.0 if actions.soon else self.config.refuse_seconds
            driver.declineOffer([{"value": o} for o in actions.declines], {"refuse_seconds": wait})
        for task_id, _agent_id in actions.kills:
            driver.killTask({"value": task_id})
        if actions.reconcile:  # an update of theirs was refused unread: ask soon, at most
            # once per RECONCILE_GAP_S however many such updates come
            self._unconfirmed.update(actions.reconcile)
            self._reconcile_at = min(self._reconcile_at, self._reconciled_at + RECONCILE_GAP_S)
        if actions.revive:
            driver.reviveOffers()
            self._suppressed_roles = ()
        elif actions.suppress:
            driver.suppressOffers()
        elif actions.suppress_roles and actions.suppress_roles != self._suppressed_roles:
            # per role (MULTI_ROLE): no queued job may use these roles' offers
            driver.suppressOffers(list(actions.suppress_roles))
            self._suppressed_roles = actions.suppress_roles


class _NoMainInterrupt:
    """Stands in for ``_thread`` inside ``pymesos.process``.

    When pymesos's I/O thread dies (e.g. the master answers 401 to a wrong secret)
    it calls ``_thread.interrupt_main()``, which raises KeyboardInterrupt in
    whatever the main thread is doing: a long-running ``dlc scheduler`` would
    exit. DLC notices the aborted driver itself (the watchdog restarts it with
    backoff), so the interrupt is only logged.
    """

    def __init__(self, real):
        self._real = real

    def interrupt_main(self, *args):
        log.error("the Mesos driver thread stopped (see the error above); DLC restarts it")

    def __getattr__(self, name):
        return getattr(self._real, name)


def _pymesos_driver(callbacks, info, master, principal, secret):
    from dlc.mesos import import_pymesos

    pymesos = import_pymesos()
    if not isinstance(pymesos.process.thread, _NoMainInterrupt):
        pymesos.process.thread = _NoMainInterrupt(pymesos.process.thread)
    return pymesos.MesosSchedulerDriver(
        callbacks,
        info,
        master,
        use_addict=False,
        implicit_acknowledgements=False,
        principal=principal,
        secret=secret,
        failover=True,  # stopping the driver never tears the framework down
        timeout=10 * 365 * 24 * 3600,  # keep retrying the master; never abort on our own
    )


# The master-state readers live in the one master client; these names stay for callers.
fetch_master_version = fetch_version
fetch_master_agents = fetch_slaves


def _kind_of(version: dict | None) -> str:
    """``"emulator"`` when ``/version`` names DLC's emulator, else ``"mesos"``."""
    return "emulator" if (version or {}).get("build_user") == EMULATOR_BUILD_USER else "mesos"
