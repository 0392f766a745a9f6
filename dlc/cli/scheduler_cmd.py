"""``dlc scheduler``: run the DLC Mesos framework and its HTTP API."""

from __future__ import annotations

import errno
import logging
import os
import shlex
import signal
import threading
from dataclasses import replace
from pathlib import Path

import click

from dlc.app.interpreter import (
    DEFAULT_SWITCH_INTERVAL_S,
    MAX_SWITCH_INTERVAL_S,
    MIN_SWITCH_INTERVAL_S,
    tune_interpreter,
)
from dlc.cli.session_opts import session_options
from dlc.errors import DlcError
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.state_paths import StatePath, prefix_warnings
from dlc.mesos.framework import WEEK_S, FrameworkConfig, check_roles, parse_group_roles
from dlc.scheduler.allocator import POLICY_MODULES
from dlc.scheduler.placement.round_cap import DEFAULT_JOBS_PER_ROUND
from dlc.scheduler.placement.share_hold import ShareHoldSettings
from dlc.scheduler.tasks.launch import ExecutorConfig

#: click types shared with ``dlc local``
PORT = click.IntRange(0, 65535)
POLICY = click.Choice(sorted(POLICY_MODULES))


class StopSignals:
    """SIGINT/SIGTERM, or an event another thread sets, end :meth:`wait`.

    Install it before telling anyone the service is up: a SIGTERM that came between "Press
    Ctrl-C" and the handler would kill the process with the default action, skipping the stop.
    The handler only sets a flag: setting a ``threading.Event`` there could deadlock, since it
    takes the event's lock, which the interrupted main thread may be holding inside
    ``Event.wait`` (seen: 3 of 8 ``dlc local`` runs hung on a SIGTERM sent right after start).
    """

    POLL_S = 0.2

    def __init__(self, done: threading.Event | None = None) -> None:
        self.done = done or threading.Event()
        self.signalled = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._note)

    def _note(self, *_: object) -> None:
        self.signalled = True

    def wait(self) -> None:
        """Block until a signal came or ``done`` was set."""
        while not self.signalled and not self.done.wait(self.POLL_S):
            pass


def stop_on_signals(done: threading.Event | None = None) -> StopSignals:
    """Install :class:`StopSignals` (see there) and return it."""
    return StopSignals(done)


def wait_for_signal(done: threading.Event | None = None) -> None:
    """Block until SIGINT/SIGTERM or ``done`` (the service threads do the work)."""
    stop_on_signals(done).wait()


def absolute_prefixes(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """``--allow-volume`` values: absolute host paths (a relative one could never match a
    job's ``-v /HOST:...``, so every mount under it would be refused)."""
    for value in values:
        if not value.startswith("/"):
            raise click.BadParameter(
                f"{value!r} is not an absolute path; pass a host directory such as /data",
                param_hint="--allow-volume",
            )
    return values


def warn_state_prefixes(prefixes: tuple[str, ...], extra: tuple[StatePath, ...] = ()) -> None:
    """One ``warning:`` line on stderr per ``--allow-volume`` prefix that is, contains or lies
    inside DLC's own state (``extra``: this command's own places), whose volumes the agents
    refuse (:mod:`dlc.executor.state_paths`)."""
    for line in prefix_warnings(prefixes, extra):
        click.echo(f"warning: {line}", err=True)


def port_in_use_error(exc: OSError, api_port: int) -> DlcError:
    """The one-line error for an API (or other) socket that could not be bound."""
    if exc.errno == errno.EADDRINUSE:
        return DlcError(f"--api-port {api_port}: already in use; pick another port, or 0 for any")
    return DlcError(f"cannot start: {exc.strerror or exc}")


class OneLineMesosErrors(logging.Filter):
    """pymesos logs a 20-line traceback each time the master cannot be reached: one line
    instead, naming the cause and what to check (``-v`` keeps the traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite pymesos records that carry a traceback; pass everything."""
        if record.name.startswith("pymesos") and record.exc_info and record.exc_info[1]:
            exc = record.exc_info[1]
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            record.msg = "cannot reach the Mesos master (%s); retrying - check --master"
            record.args = (reason,)
            record.exc_info, record.exc_text = None, None
        return True


def configure_logging(verbose: bool, level: int) -> None:
    """Log to stderr at ``level`` (DEBUG with ``-v``), one line per record."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        for handler in logging.getLogger().handlers:
            handler.addFilter(OneLineMesosErrors())


def executor_options(func):
    """How agents start the executor: command, environment, GPU style, network, memlock."""
    options = [
        click.option("--executor-command", metavar="CMD",
                     help="Executor command line on the agents [default: this scheduler's "
                     "`PYTHON -m dlc executor`; e.g. '/opt/dlc/bin/dlc executor']."),
        click.option("--executor-env", multiple=True, metavar="KEY=VALUE",
                     help="Environment of the executor process (repeatable)."),
        click.option("--executor-gpu-style", type=click.Choice([s.value for s in GpuStyle]),
                     help="How containers get GPUs (the executor's --gpu-style; default auto: "
                     "what each engine supports)."),
        click.option("--executor-network", type=click.Choice(["bridge", "host", "none"]),
                     help="Docker network of task containers [default: bridge; host for "
                     "multi-node NCCL]."),
        click.option("--executor-memlock-unlimited", is_flag=True,
                     help="Containers get `ulimit -l unlimited` (NCCL over RDMA)."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def executor_config(command, env, gpu_style, network, memlock) -> ExecutorConfig:
    """The :class:`ExecutorConfig` the ``--executor-*`` options describe.

    Raises:
        DlcError: an ``--executor-env`` item that is not ``KEY=VALUE``.
    """
    variables = []
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum():
            raise DlcError(f"--executor-env {item!r}: give KEY=VALUE, e.g. DLC_DEVICE_ROOT=/dev")
        variables.append((key, value))
    if gpu_style:
        variables.append(("DLC_GPU_STYLE", gpu_style))
    if network:
        variables.append(("DLC_NETWORK_MODE", network))
    config = ExecutorConfig(env=tuple(variables), command=command or None)
    if memlock:
        base = command or f"{shlex.quote(config.python)} -m dlc executor"
        config = replace(config, command=f"{base} --memlock-unlimited")
    return config


def share_hold_options(func):
    """The ``--share-hold-*`` options (docs/sharing.md)."""
    options = [
        click.option("--share-hold-reserve", type=float, default=0.0, show_default=True,
                     metavar="FACTOR",
                     help="While whole GPUs are less of the free GPU capacity than this times "
                     "the part of the queued and running GPU demand that whole-GPU jobs ask, a "
                     "share whose leftover few of those shares fit may not open a whole GPU; it "
                     "waits for a shared GPU with room (0: off; e.g. 1, or 1.5 for a saturated "
                     "cluster: docs/sharing.md)."),
        click.option("--share-hold-fill", type=float, default=0.1, show_default=True,
                     metavar="FRACTION",
                     help="A leftover counts as unfillable when fewer than this part of the "
                     "queued and running shares fit in it."),
        click.option("--share-hold-max-wait", type=float, default=600.0, show_default=True,
                     metavar="SECONDS",
                     help="A share held this long is placed anyway, so nobody starves."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def print_login(api_url: str, token: str | None, token_file: str | None) -> None:
    """Tell the user where the API is and how to authenticate.

    No URL printed here carries a token: the dashboard signs in with a form (the token
    goes in a POST body and comes back as an HttpOnly cookie), so tokens stay out of
    browser history, proxy and access logs.
    """
    click.echo(f"DLC API:   {api_url}")
    click.echo(f"  export DLC_API={api_url}")
    if token:
        click.echo(f"  export DLC_TOKEN={token}   # admin token, shown once")
    if token_file:
        click.echo(f"  (token also written to {token_file})")
    click.echo(f"Dashboard: {api_url}/   (sign in with your API token)")
    click.echo(f"Metrics:   {api_url}/metrics")


def read_admin_token(token_file: str | None) -> str | None:
    """The admin token from ``--admin-token-file`` (``None`` without one).

    Raises:
        DlcError: the file cannot be read or holds no token.
    """
    if token_file is None:
        return None
    try:
        token = Path(token_file).read_text().strip()
    except OSError as exc:
        raise DlcError(
            f"--admin-token-file {token_file}: cannot read it ({exc.strerror or exc}); "
            "give a readable file holding the token"
        ) from None
    if not token or len(token.split()) != 1:
        raise DlcError(
            f"--admin-token-file {token_file}: must hold one token on one line; write it with "
            "e.g. `umask 077; openssl rand -hex 24 > FILE`"
        )
    return token


def _refuse_token_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise DlcError(
            "--admin-token: not accepted, command lines are visible to every user in `ps`; "
            "set DLC_ADMIN_TOKEN in the environment or pass --admin-token-file FILE"
        )


def admin_token_options(func):
    """``--admin-token-file`` and the ``DLC_ADMIN_TOKEN`` variable (never a flag with the
    token itself: command lines are visible to every user in ``ps``; the old
    ``--admin-token`` flag is refused with that advice)."""
    func = click.option(
        "--admin-token",
        hidden=True,
        expose_value=False,
        callback=_refuse_token_flag,
    )(func)
    return click.option(
        "--admin-token-file",
        metavar="FILE",
        help="Register the admin token read from FILE (keep it mode 600). Or set "
        "DLC_ADMIN_TOKEN in the environment. There is no flag taking the token itself: "
        "command lines are visible to every user in `ps`.",
    )(func)


def admin_token_from(token_file: str | None) -> str | None:
    """The admin token: ``--admin-token-file`` wins over ``$DLC_ADMIN_TOKEN``."""
    return read_admin_token(token_file) or os.environ.get("DLC_ADMIN_TOKEN") or None


@click.command("scheduler")
@click.option("--master", help="Mesos master HOST:PORT or zk://HOST:PORT/mesos (required).")
@click.option(
    "--db",
    default="dlc-scheduler.db",
    show_default=True,
    help="Job store: a SQLite file, or postgresql://USER@HOST:PORT/DB (HA, docs/ha.md).",
)
@click.option(
    "--zk",
    metavar="zk://HOST:PORT[,...]/PATH",
    help="HA: stand by until elected leader through this ZooKeeper (docs/ha.md).",
)
@click.option("--api-host", default="127.0.0.1", show_default=True, help="API listen address.")
@click.option("--api-port", type=PORT, default=8642, show_default=True, help="API port (0: any).")
@click.option("--api-advertise-url", metavar="URL",
              help="The API as agents reach it (executors fetch --workdir snapshots there), "
              "e.g. https://dlc.example.org; default: http://API-HOST:API-PORT.")  # fmt: skip
@click.option("--policy", type=POLICY, default="tree", show_default=True, help="GPU placement.")
@click.option("--allow-volume", multiple=True, callback=absolute_prefixes,
              help="Host path prefix jobs may mount (never DLC's own state below it, "
                   "such as /run/dlc-mps under /run).")  # fmt: skip
@click.option("--allow-registry", multiple=True, help="Registry jobs may pull from (default: any).")
@click.option("--container-user", default="65534:65534", show_default=True, help="UID:GID of jobs.")
@click.option("--allow-root", is_flag=True, help="Let --container-user be root (uid or gid 0).")
@click.option("--allow-job-user", is_flag=True, help="Let jobs pick their container UID:GID.")
@click.option("--sandbox-root", multiple=True, help="Local agent work dir (for dlc logs).")
@admin_token_options
@click.option("--create-token", metavar="USER", help="Print a new token for USER and exit.")
@click.option("--admin", is_flag=True, help="With --create-token: an admin token.")
@click.option(
    "--max-priority",
    type=click.IntRange(-1000, 1000),
    default=0,
    show_default=True,
    help="With --create-token: highest --priority its jobs may use (admins: any).",
)
@click.option("--token-file", help="Write the first admin token here (mode 600).")
@click.option("--principal", envvar="DLC_MESOS_PRINCIPAL", help="Mesos framework principal.")
@click.option("--secret", envvar="DLC_MESOS_SECRET", help="Mesos framework secret.")
@click.option(
    "--role", "roles", multiple=True, metavar="ROLE",
    help="Mesos role to subscribe with; repeat for several (MULTI_ROLE). Default: '*'. "
    "Resources reserved for these roles are used first (docs/roles.md).",
)  # fmt: skip
@click.option(
    "--reserve", is_flag=True,
    help="Keep the GPUs DLC uses dynamically reserved for its --role (RESERVE), so no other "
    "framework takes one between two jobs; released when idle (docs/roles.md).",
)  # fmt: skip
@click.option(
    "--unreserve-after", type=click.FloatRange(min=0), default=300.0, show_default=True,
    metavar="SECONDS", help="With --reserve: release a GPU unused this long.",
)  # fmt: skip
@click.option(
    "--group-role", "group_roles", multiple=True, metavar="GROUP=ROLE",
    help="Run a DLC group's jobs only on offers of this Mesos role (one of --role), so Mesos "
    "quota on the role guarantees the group's GPUs; repeatable (docs/roles.md).",
)  # fmt: skip
@click.option(
    "--fair-share-half-life", default="7d", show_default=True, metavar="SPAN",
    help="Half-life of each group's decayed GPU-hours (7d, 12h, 0: off); lower usage for its "
    "weight borrows first and is reclaimed last (docs/quotas.md).",
)  # fmt: skip
@click.option(
    "--fair-share-billing", default="auto", show_default=True, metavar="cpus=N,mem=SIZE",
    help="What fair share bills as one GPU-hour: N CPU-hours or SIZE-hours of memory (a job is "
    "billed the largest of its GPUs, CPUs and memory); auto: the cluster's CPUs and memory per "
    "GPU (8 CPUs where it has no GPU), 0: not billed (docs/quotas.md).",
)  # fmt: skip
@click.option(
    "--protect", "protect", multiple=True, metavar="CLASS=MIN_RUNTIME[:DELAY]",
    help="Per priority class: the runtime before a job may be preempted and the delay from the "
    "decision to the eviction, e.g. normal=10m:30s; repeatable (docs/quotas.md).",
)  # fmt: skip
@click.option("--failover-timeout", type=float, default=WEEK_S, show_default=True, help="Seconds.")
@click.option("--refuse-seconds", type=float, default=5.0, show_default=True)
@click.option(
    "--max-queued-per-user",
    type=click.IntRange(0),
    default=1000,
    show_default=True,
    help="Queued jobs one user may have; more submits are refused (0: no cap; admins: any).",
)
@click.option(
    "--max-connections-per-ip",
    type=click.IntRange(0),
    default=64,
    show_default=True,
    help="Open API connections per client address (0: no cap, e.g. behind a proxy).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=4096,
    show_default=True,
    help="Open API connections in all; more are refused at accept.",
)
@click.option(
    "--consolidation-moves-per-hour",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Preemptible jobs DLC may move per hour so that a whole-GPU job fragmentation "
    "keeps waiting gets its set on one node (0: off; docs/scheduler.md).",
)
@click.option(
    "--max-jobs-per-round",
    type=click.IntRange(0),
    default=DEFAULT_JOBS_PER_ROUND,
    show_default=True,
    help="Queued jobs one offer round considers: the head of the queue and, in turns, the "
    "longest-waiting others (0: all; docs/scheduler.md).",
)
@click.option(
    "--gil-switch-interval", type=click.FloatRange(MIN_SWITCH_INTERVAL_S, MAX_SWITCH_INTERVAL_S),
    default=DEFAULT_SWITCH_INTERVAL_S, show_default=True, metavar="SECONDS",
    help="How long a request thread may wait for the GIL while an offer round runs before the "
    "round lets it go (Python's default 0.005 queues submits behind a round; docs/scheduler.md).",
)  # fmt: skip
@share_hold_options
@executor_options
@click.option("--metrics-tenant-labels", is_flag=True,
              help="Add per-user and per-job GPU usage to /metrics (user names and job ids "
              "on an unauthenticated endpoint: only behind a trusted scraper).")  # fmt: skip
@session_options
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG.")
def command(master, db, zk, api_host, api_port, api_advertise_url, policy, allow_volume,
            allow_registry,
            container_user, max_queued_per_user, max_connections_per_ip, max_connections,
            allow_root, allow_job_user, sandbox_root, admin_token_file, create_token, admin,
            max_priority, token_file, principal, secret, roles, reserve, unreserve_after,
            group_roles, share_hold_reserve, share_hold_fill, share_hold_max_wait,
            fair_share_half_life, fair_share_billing, protect, consolidation_moves_per_hour,
            max_jobs_per_round, gil_switch_interval, failover_timeout,
            refuse_seconds, executor_command, executor_env, executor_gpu_style, executor_network,
            executor_memlock_unlimited, metrics_tenant_labels, verbose, sessions):  # fmt: skip
    """Run the DLC Mesos framework and its HTTP API until interrupted.

    Stopping it never tears the framework down: tasks keep running and a
    restart with the same --db reconnects to them.
    """
    from dlc.app.service import SchedulerService, ServiceConfig, write_token_file
    from dlc.scheduler.tenancy.billing import parse_billing
    from dlc.scheduler.tenancy.fair_share import parse_span
    from dlc.scheduler.tenancy.preemption import parse_protection
    from dlc.store.select import open_store

    configure_logging(verbose, logging.INFO)
    share_hold = ShareHoldSettings(share_hold_reserve, share_hold_fill, share_hold_max_wait)
    admin_token = admin_token_from(admin_token_file)
    if zk:
        from dlc.app.leader import ZkUrl

        ZkUrl.parse(zk)  # a typo is one line now, not a hang at the election
    if create_token:
        store = open_store(db)
        click.echo(store.add_token(create_token, admin=admin, max_priority=max_priority))
        store.close()
        return
    warn_state_prefixes(tuple(allow_volume))
    if not master:
        raise DlcError("--master is required: e.g. --master 127.0.0.1:5050 or zk://zk1:2181/mesos")
    if reserve and not [r for r in roles if r != "*"]:
        raise DlcError("--reserve needs --role ROLE: Mesos reserves resources for a role, not '*'")
    if (principal is None) != (secret is None):
        raise DlcError("give both --principal and --secret, or neither")
    framework = FrameworkConfig(
        master=master,
        roles=check_roles(roles),
        group_roles=parse_group_roles(group_roles, check_roles(roles)),
        reserve=reserve,
        unreserve_after_s=unreserve_after,
        principal=principal,
        secret=secret,
        failover_timeout_s=failover_timeout,
        refuse_seconds=refuse_seconds,
    )
    config = ServiceConfig(
        master=master,
        db=db,
        api_host=api_host,
        api_port=api_port,
        api_advertise_url=api_advertise_url or None,
        policy=policy,
        allowed_volumes=tuple(allow_volume),
        allowed_registries=tuple(allow_registry),
        container_user=container_user,
        allow_root=allow_root,
        allow_job_user=allow_job_user,
        sandbox_roots=tuple(sandbox_root),
        admin_token=admin_token,
        framework=framework,
        zk=zk,
        metrics_tenant_labels=metrics_tenant_labels,
        max_queued_per_user=max_queued_per_user,
        max_connections_per_ip=max_connections_per_ip,
        max_connections=max_connections,
        sessions=sessions,
        share_hold=share_hold,
        consolidation_moves_per_hour=consolidation_moves_per_hour,
        max_jobs_per_round=max_jobs_per_round or None,
        fair_share_half_life_s=parse_span(fair_share_half_life),
        fair_share_billing=parse_billing(fair_share_billing),
        protection=parse_protection(protect),
        executor=executor_config(
            executor_command,
            executor_env,
            executor_gpu_style,
            executor_network,
            executor_memlock_unlimited,
        ),  # fmt: skip
    )
    stop = stop_on_signals()
    done = stop.done
    tune_interpreter(gil_switch_interval)
    try:
        service = SchedulerService(config)
        # Fencing: a leader that lost its ZooKeeper session has stopped its driver and
        # its store refuses writes; it exits so its supervisor restarts it as a standby.
        service.on_step_down = lambda why: done.set()
        service.start()
    except OSError as exc:
        raise port_in_use_error(exc, api_port) from None
    if token_file and service.admin_token:
        write_token_file(token_file, service.admin_token)
    print_login(service.api_url, None if admin_token else service.admin_token, token_file)
    click.echo(f"Mesos:     {master} (framework id {service.core.framework_id or 'pending'})")
    if zk:
        click.echo(
            f"HA:        standing by until elected through {zk} ({service.role()['instance']})"
        )
    try:
        stop.wait()
    finally:
        service.stop()
    if service.election is not None and service.election.lost.is_set():
        raise DlcError(
            "lost the ZooKeeper session while leading: stepped down; restart to stand by"
        )
