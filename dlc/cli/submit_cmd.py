"""``dlc submit``: send a job spec to the scheduler API (``--wait``: and wait for its end).

``jobs``, ``status``, ``kill`` and ``logs`` have their own ``*_cmd`` modules; all of them
talk to ``dlc scheduler``/``dlc local`` through :mod:`dlc.cli.client_opts` (flags, env,
config-file contexts).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import click
import yaml

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options, check_api_url
from dlc.cli.job_view import exit_code, follow
from dlc.cli.output import emit, output_option
from dlc.errors import JobSpecError
from dlc.images.catalog import yaml_problem
from dlc.scheduler.jobs.job import JobSpec

_MEM_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]?)?\s*$")
_MEM_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
#: a bare number below this many MiB is refused: ``--mem 32`` almost surely meant 32 GiB,
#: and 32 MiB would not start a Python interpreter (a unit says which was meant)
BARE_MIB_FLOOR = 256


def parse_mem(text: str, what: str = "a job") -> int:
    """``4096`` (MiB), ``512M``, ``16G``, ``16GiB`` -> MiB.

    A number without a unit is MiB (as before), but one under :data:`BARE_MIB_FLOOR` is
    refused: it looks like GiB (``what`` says whose memory it is, for the message).

    Raises:
        JobSpecError: not a size, or a bare number that looks like GiB.
    """
    if len(str(text).strip()) > 40:  # float() of 5,000 digits is inf, int(inf) a traceback
        raise JobSpecError(
            "mem",
            f"a {len(str(text).strip())}-character value is more than any node has; "
            "pass --mem like 4096, 512M or 16G",
        )
    match = _MEM_RE.match(str(text))
    if not match:
        raise JobSpecError("mem", f"{text!r} is not a size like 4096, 512M or 16G")
    if match.group(2) is None and float(match.group(1)) < BARE_MIB_FLOOR:
        number = match.group(1)
        raise JobSpecError(
            "mem",
            f"{number} without a unit is {number} MiB, too little for {what}; "
            f"write {number}G for GiB (or {number}M if you mean MiB)",
        )
    unit = (match.group(2) or "m")[0].lower()
    return max(1, int(float(match.group(1)) * _MEM_UNITS[unit]))


class _SpecLoader(yaml.SafeLoader):
    """The safe loader, keeping an integer too long for ``int()`` (4,300 digits) as its text
    so that the spec's checks name the field and its range (PyYAML raises a bare
    ``ValueError`` there)."""


def _int_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        return loader.construct_scalar(node)


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _int_or_text)


def load_spec_file(path: str) -> dict[str, Any]:
    """Read a YAML job spec (``mem``/``memory`` may be given as a size string).

    Raises:
        JobSpecError: unreadable file or not a mapping.
    """
    try:
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_SpecLoader) or {}
    except OSError as exc:
        raise JobSpecError("spec", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise JobSpecError("spec", f"{path} is not UTF-8 text; give a YAML job spec") from None
    except yaml.YAMLError as exc:
        raise JobSpecError("spec", f"{path} is not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise JobSpecError("spec", f"{path} must hold a mapping (framework: ..., gpus: ...)")
    for key in ("mem", "memory"):
        if key in data:
            data["mem_mib"] = parse_mem(data.pop(key))
    return data


def build_spec(file: str | None, flags: dict[str, Any], command: tuple[str, ...]) -> dict:
    """Merge a YAML spec with command-line flags (flags win)."""
    spec = load_spec_file(file) if file else {}
    for key, value in flags.items():
        if value not in (None, (), []):
            spec[key] = value
    if "env" in flags and flags["env"]:
        spec["env"] = list(flags["env"])
    if command:
        spec["command"] = list(command)
    return spec


class SubmitCommand(click.Command):
    """``dlc submit`` whose unknown-option error says where the job's command goes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse; ``dlc submit --image x ls -la`` suggests ``-- ls -la``."""
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if exc.possibilities:
                raise  # a misspelt dlc option: click's "Did you mean" is the better hint
            raise click.UsageError(
                f"No such option: {exc.option_name}; if it belongs to the job's command, "
                "put the command after --, e.g. dlc submit --image IMG -- ls -la",
                ctx,
            ) from None


@click.command("submit", cls=SubmitCommand)
@click.option("-f", "--file", "spec_file", help="YAML job spec; flags override it.")
@click.option("--framework", help="Framework and version, e.g. pytorch:2.3.")
@click.option("--image", help="Run this image instead of a catalog framework.")
@click.option("--gpus", help="GPUs per node (default 1), or a share of one GPU: 0.5.")
@click.option("--gpu-memory", help="A memory share of one GPU: 4G, 512M (compute shared).")
@click.option(
    "--exclusive-per-user",
    "exclusive_per",
    flag_value="user",
    default=None,
    help="Share the GPU only with your own shares (a fault under MPS stays yours).",
)
@click.option("--exclusive-per-group", "exclusive_per", flag_value="group",
              help="Share the GPU only with shares of your group.")  # fmt: skip
@click.option(
    "--gpu-model",
    help="Only GPUs whose model contains this, e.g. V100; several allowed: 'V100|A100'.",
)
@click.option(
    "--gpu-vendor",
    type=click.Choice(["nvidia", "amd"]),
    help="Only this vendor's GPUs (a framework image implies its own: ROCm = amd).",
)
# Numbers stay text here: the spec's checks name the field and its range for any value
# (click's own message for a 5,000-digit --nodes echoed every digit).
@click.option("--nodes", metavar="N|MIN:MAX",
              help="Agents to span (gang-placed; default 1); MIN:MAX: elastic.")  # fmt: skip
@click.option("--cpus", metavar="N", help="CPUs per node (default 1).")
@click.option("--mem", help="Memory per node: 4096 (MiB), 512M, 16G (default 1G).")
@click.option("-e", "--env", multiple=True, help="KEY=VALUE environment (repeatable).")
@click.option("-v", "--volume", multiple=True,
              help="HOST:CTR[:ro|:rw] bind mount, READ-ONLY unless :rw; HOST must be under "
                   "the scheduler's --allow-volume and hold none of DLC's state "
                   "(repeatable).")  # fmt: skip
@click.option("--priority", metavar="N", help="Higher runs first (default 0).")
@click.option("--retries", metavar="N", help="Re-queue a failed or lost job this often.")
@click.option("--name", help="Short job name.")
@click.option("--container-user", help="UID:GID to run as (where the cluster allows it).")
@click.option("--user", "as_me", is_flag=True,
              help="Run as your own UID:GID (files in rw volumes stay yours); the scheduler "
                   "must run with --allow-job-user.")  # fmt: skip
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Upload this directory (minus .dlcignore/.gitignore, at most 64 MiB) to "
                   "/workspace, the job's working directory.")  # fmt: skip
@click.option("--interactive", is_flag=True, default=None,
              help="Start JupyterLab (or COMMAND serving on $DLC_ENV_PORT); `dlc open JOB` "
                   "prints its URL.")  # fmt: skip
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    metavar="SECONDS",
    help="Stop an interactive job after this many seconds idle (default 3600).",
)
@click.option("--pool", help="Resource pool to run in (default: your group's).")
@click.option("--priority-class", help="low, normal, high or urgent (sets --priority).")
@click.option("--gang-topology", metavar="LEVEL[:MODE]",
              help="Keep a gang's nodes under one switch, rack or zone: preferred (the default "
                   "for gangs: switch:preferred) or required (wait for room there).")  # fmt: skip
@click.option("--wait", is_flag=True,
              help="Wait for the job to end; exit with its exit code (killed: 137).")  # fmt: skip
@click.option("--interval", type=click.FloatRange(0.1), default=2.0, hidden=True)
@output_option
@api_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def submit(spec_file, framework, image, gpus, gpu_memory, exclusive_per, gpu_model, gpu_vendor,
           nodes, cpus,
           mem, env, volume, priority, retries, name, container_user, as_me, workdir, interactive,
           idle_timeout_s, pool, priority_class, wait, interval, output, api, token,
           command, gang_topology=None):  # fmt: skip
    """Submit a job: dlc submit --framework pytorch:2.3 --gpus 4 -- python train.py

    Prints the job id (-o json|yaml: the job). With --wait, state changes go to stderr
    and the command exits with the job's exit code.
    """
    container_user = _own_user(container_user) if as_me else container_user
    flags = {
        "framework": framework,
        "image": image,
        "gpus": gpus,
        "gpu_memory": gpu_memory,
        "exclusive_per": exclusive_per,
        "gpu_model": gpu_model,
        "gpu_vendor": gpu_vendor,
        "nodes": nodes,
        "cpus": cpus,
        "mem_mib": parse_mem(mem) if mem else None,
        "env": env,
        "volumes": list(volume),
        "priority": priority,
        "retries": retries,
        "name": name,
        "container_user": container_user,
        "interactive": interactive,
        "idle_timeout_s": idle_timeout_s,
        "pool": pool,
        "priority_class": priority_class,
        "gang_topology": gang_topology,
    }
    spec = build_spec(spec_file, flags, tuple(command))
    # The scheduler checks again; checking here answers bad specs without a round trip
    # (and when no scheduler is running yet).
    JobSpec.from_dict(spec)
    client = ApiClient(api, token)
    if workdir:
        from dlc.cli.snapshot import make_snapshot, upload_snapshot

        spec["workdir"] = upload_snapshot(client, make_snapshot(workdir))
    job = client.submit(spec)
    if output in ("json", "yaml"):
        emit(job, output)
    else:
        click.echo(job["id"])
    if spec.get("interactive"):
        click.echo(f"interactive: `dlc open {job['id']}` prints its URL once it runs", err=True)
    if job.get("framework_url"):
        where = "Mesos emulator" if job.get("master_kind") == "emulator" else "Mesos UI"
        click.echo(f"{where}: {job['framework_url']}", err=True)
    if wait:
        for now in follow(client, job["id"], interval):
            click.echo(f"{now['id']} {now['state']}: {now['message']}", err=True)
        click.get_current_context().exit(exit_code(now))


def _own_user(container_user: str | None) -> str:
    """``UID:GID`` of the caller for ``--user`` (refused together with ``--container-user``)."""
    if container_user:
        raise click.UsageError("--user and --container-user both pick the user; pass one of them")
    return f"{os.getuid()}:{os.getgid()}"


command = submit

__all__ = ["api_options", "check_api_url", "command", "submit"]
