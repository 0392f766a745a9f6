"""Entry point of the ``dlc`` command.

Subcommands are loaded lazily from :data:`COMMANDS` so that ``dlc --help`` stays
fast and a broken optional dependency (docker, pynvml) only affects the command
that needs it. To add a command, write ``dlc/cli/<name>_cmd.py`` with a click
command or group called ``command`` and add one line to :data:`COMMANDS`.

Every :class:`~dlc.errors.DlcError` escaping a command becomes ``Error: <message>``
on stderr with the error's exit code; click's usage errors become one such line too
(exit code 2). Anything else is a bug: it is reported on one line as well (exit code
70), and ``DLC_DEBUG=1`` shows its traceback. A reader that stops early
(``dlc images list | head -2``) is no error: the command ends quietly with exit code 1,
as click does for a closed pipe.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import NoReturn

import click

from dlc import __version__
from dlc.errors import DlcError

#: subcommand name -> (module path, one-line help shown in ``dlc --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "topology": ("dlc.cli.topology_cmd", "Report a machine's GPU topology (tree, links, groups)."),
    "node-config": ("dlc.cli.node_config_cmd", "Print mesos-agent --resources/--attributes flags."),
    "probe": ("dlc.cli.probe_cmd", "Measure GPU P2P bandwidth/latency; compare with nominal."),
    "executor": ("dlc.cli.executor_cmd", "Run the Mesos executor (started by the agent)."),
    "images": ("dlc.cli.images_cmd", "List framework images; check them against a driver."),
    "cleanup": ("dlc.cli.cleanup_cmd", "Remove orphaned DLC containers from this host."),
    "scheduler": ("dlc.cli.scheduler_cmd", "Run the DLC Mesos framework and its HTTP API."),
    "local": ("dlc.cli.local_cmd", "Run Mesos emulator + scheduler on this machine (no install)."),
    "submit": ("dlc.cli.submit_cmd", "Submit a job (framework, GPUs, command)."),
    "jobs": ("dlc.cli.jobs_cmd", "List jobs."),
    "status": ("dlc.cli.status_cmd", "Show one job with its history."),
    "kill": ("dlc.cli.kill_cmd", "Kill a job."),
    "logs": ("dlc.cli.logs_cmd", "Print a job's container output (-f to follow)."),
    "open": ("dlc.cli.open_cmd", "Print the URL of an interactive job's JupyterLab."),
    "exec": ("dlc.cli.exec_cmd", "Run a command in a running job's container (JOB -- CMD)."),
    "shell": ("dlc.cli.shell_cmd", "Open an interactive shell in a running job's container."),
    "cp": ("dlc.cli.cp_cmd", "Copy a file from a job's /outputs (JOB:PATH DEST)."),
    "queue": ("dlc.cli.queue_cmd", "Waiting jobs in run order with group, pool and reason."),
    "quota": ("dlc.cli.quota_cmd", "Group usage against guarantees; set quotas (admin)."),
    "groups": ("dlc.cli.groups_cmd", "Groups and members; create, add, limit (admin)."),
    "nodes": ("dlc.cli.nodes_cmd", "Agents by pool: GPUs free, taken, draining."),
    "usage": ("dlc.cli.usage_cmd", "GPUs allocated versus used per user, group or job."),
    "simulate": ("dlc.cli.simulate_cmd", "Replay cluster traces through placement policies."),
    "login": ("dlc.cli.login_cmd", "Save an API address and token as a named context."),
    "config": ("dlc.cli.config_cmd", "Show the config file's contexts; switch between them."),
    "tokens": ("dlc.cli.tokens_cmd", "List, create, expire and revoke API tokens (admin)."),
    "doctor": ("dlc.cli.doctor_cmd", "Check an agent host: driver, Docker, GPU runtime, flags."),
    "setup-host": ("dlc.cli.setup_host_cmd", "Print or install the shipped systemd units, docs."),
}


#: ``dlc --help`` in the order a newcomer needs it: (heading, command names); every command of
#: :data:`COMMANDS` is in exactly one section (a test checks it)
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here (README, Quick start)", ("local", "submit", "jobs", "status", "logs")),
    ("Your jobs", ("kill", "cp", "open", "exec", "shell", "queue", "usage", "images")),
    ("Access and tenancy", ("login", "config", "tokens", "groups", "quota", "nodes")),
    (
        "Hosts and operators",
        (
            "scheduler",
            "node-config",
            "doctor",
            "setup-host",
            "topology",
            "probe",
            "simulate",
            "cleanup",
            "executor",
        ),
    ),  # fmt: skip
)


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Names of all subcommands, sorted."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """Import ``name``'s module and return its ``command`` (``None``: no such command)."""
        if name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the subcommands by :data:`SECTIONS`, each with its static one-line help."""
        # Static help, so that `dlc --help` imports no subcommand module.
        for heading, names in SECTIONS:
            with formatter.section(heading):
                formatter.write_dl([(name, COMMANDS[name][1]) for name in names])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the group's own options; a usage error becomes one ``Error:`` line."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _fail_usage(ctx, exc)

    def invoke(self, ctx: click.Context):
        """Run the subcommand; its errors become one ``Error:`` line and an exit code."""
        try:
            return super().invoke(ctx)
        except DlcError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:
            _fail_usage(ctx, exc)
        except (click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            _quiet_closed_pipe()  # `dlc topology | head`: the reader had enough
            ctx.exit(0)
        except SystemExit as exc:
            # rich answers a closed pipe by pointing stdout at /dev/null and exiting 1
            if exc.code == 1 and _stdout_is_devnull():
                ctx.exit(0)
            raise
        except Exception as exc:
            _internal_error(ctx, exc)


def _internal_error(ctx: click.Context, exc: Exception) -> NoReturn:
    """A bug, not a user mistake: still one line, with the way to get the details."""
    if os.environ.get("DLC_DEBUG"):
        raise exc
    click.echo(
        f"Error: internal error {type(exc).__name__}: {exc} "
        "(a DLC bug; rerun with DLC_DEBUG=1 for the traceback and report it)",
        err=True,
    )
    ctx.exit(70)  # EX_SOFTWARE


def _quiet_closed_pipe() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    # ValueError: no real file descriptor (a test runner's buffer)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _stdout_is_devnull() -> bool:
    try:
        out, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def _fail_usage(ctx: click.Context, exc: click.UsageError) -> NoReturn:
    """Print a click usage error as one line (click's default is a usage block) and exit.

    A bare group (``dlc``, ``dlc images``) raises a usage error too, to show its help:
    that one keeps click's own output.
    """
    # NoArgsIsHelpError exists from click 8.2 on; 8.1 prints the help without raising.
    if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        raise exc
    where = exc.ctx.command_path if exc.ctx else ctx.command_path
    message = exc.format_message().rstrip(".")
    click.echo(f"Error: {message} (see '{where} --help')", err=True)
    ctx.exit(exc.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dlc")
def cli() -> None:
    """DLC: deep-learning containers on Apache Mesos with topology-aware GPU placement.

    \b
    New here? On one machine, no Mesos needed:
      dlc local --simulate examples/topologies/dgx1-v100.txt   # prints DLC_API and DLC_TOKEN
      dlc submit --image dlc-test/busybox:1 --gpus 1 -- echo hello
      dlc jobs; dlc logs JOB
    Every command takes -h; listings take -o json|yaml|wide.
    """


def main(argv: list[str] | None = None) -> None:
    """Run the ``dlc`` command (console-script entry point)."""
    try:
        cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="dlc")
    finally:
        # what is still buffered goes out now, where a closed pipe can be told apart
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_closed_pipe()  # `dlc images list | head -2`: a quiet, successful end
            sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
