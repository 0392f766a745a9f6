"""``dlc submit``, ``dlc jobs``, ``dlc status``, ``dlc kill``, ``dlc logs``: the API's clients.

All five talk to a running ``dlc scheduler`` or ``dlc local`` at ``--api``
(``$DLC_API``) with ``--token`` (``$DLC_TOKEN``). The ``*_cmd`` modules beside
this one expose each command to the lazy ``dlc`` group.
"""

from __future__ import annotations

import re
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import click
import yaml

from dlc.api.client import ApiClient
from dlc.errors import ApiError, JobSpecError
from dlc.images.catalog import yaml_problem
from dlc.scheduler.jobs import JobSpec


def check_api_url(ctx: click.Context | None, param: Any, value: str | None) -> str | None:
    """Click callback: ``--api`` must be an ``http(s)://HOST[:PORT]`` URL.

    Raises:
        ApiError: anything else (checked before any request is made).
    """
    if value is None:
        return None
    parts = urllib.parse.urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(
            f"--api/DLC_API: {value!r} is not an http(s) URL; use e.g. http://127.0.0.1:8642"
        )
    return value


def api_options(func):
    """Add ``--api``/``--token`` (with their environment variables) to a command."""
    func = click.option(
        "--token", envvar="DLC_TOKEN", help="API token (env DLC_TOKEN).", metavar="TOKEN"
    )(func)
    return click.option(
        "--api",
        envvar="DLC_API",
        help="Scheduler API URL (env DLC_API; default http://127.0.0.1:8642).",
        metavar="URL",
        callback=check_api_url,
    )(func)


_MEM_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]?)?\s*$")
_MEM_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_mem(text: str) -> int:
    """``4096`` (MiB), ``512M``, ``16G``, ``16GiB`` -> MiB.

    Raises:
        JobSpecError: not a size.
    """
    match = _MEM_RE.match(str(text))
    if not match:
        raise JobSpecError("mem", f"{text!r} is not a size like 4096, 512M or 16G")
    unit = (match.group(2) or "m")[0].lower()
    return max(1, int(float(match.group(1)) * _MEM_UNITS[unit]))


def load_spec_file(path: str) -> dict[str, Any]:
    """Read a YAML job spec (``mem``/``memory`` may be given as a size string).

    Raises:
        JobSpecError: unreadable file or not a mapping.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
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


@click.command("submit", context_settings={"ignore_unknown_options": False})
@click.option("-f", "--file", "spec_file", help="YAML job spec; flags override it.")
@click.option("--framework", help="Framework and version, e.g. pytorch:2.3.")
@click.option("--image", help="Run this image instead of a catalog framework.")
@click.option("--gpus", type=int, help="GPUs per node (default 1).")
@click.option("--gpu-model", help="Only GPUs whose model contains this, e.g. V100.")
@click.option("--nodes", type=int, help="Agents to span (gang-placed; default 1).")
@click.option("--cpus", type=float, help="CPUs per node (default 1).")
@click.option("--mem", help="Memory per node: 4096 (MiB), 512M, 16G (default 1G).")
@click.option("-e", "--env", multiple=True, help="KEY=VALUE environment (repeatable).")
@click.option("-v", "--volume", multiple=True, help="/host:/ctr[:ro|rw] (allow-listed).")
@click.option("--priority", type=int, help="Higher runs first (default 0).")
@click.option("--retries", type=int, help="Re-queue a failed or lost job this often.")
@click.option("--name", help="Short job name.")
@click.option("--container-user", help="UID:GID to run as (where the cluster allows it).")
@click.option("--pool", help="Resource pool to run in (default: your group's).")
@click.option("--priority-class", help="low, normal, high or urgent (sets --priority).")
@api_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def submit(spec_file, framework, image, gpus, gpu_model, nodes, cpus, mem, env, volume, priority,
           retries, name, container_user, pool, priority_class, api, token,
           command):  # fmt: skip
    """Submit a job: dlc submit --framework pytorch:2.3 --gpus 4 -- python train.py"""
    flags = {
        "framework": framework,
        "image": image,
        "gpus": gpus,
        "gpu_model": gpu_model,
        "nodes": nodes,
        "cpus": cpus,
        "mem_mib": parse_mem(mem) if mem else None,
        "env": env,
        "volumes": list(volume),
        "priority": priority,
        "retries": retries,
        "name": name,
        "container_user": container_user,
        "pool": pool,
        "priority_class": priority_class,
    }
    spec = build_spec(spec_file, flags, tuple(command))
    # The scheduler checks again; checking here answers bad specs without a round trip
    # (and when no scheduler is running yet).
    JobSpec.from_dict(spec)
    job = ApiClient(api, token).submit(spec)
    click.echo(job["id"])
    if job.get("framework_url"):
        where = "Mesos emulator" if job.get("master_kind") == "emulator" else "Mesos UI"
        click.echo(f"{where}: {job['framework_url']}", err=True)


def _age(submitted_at: float) -> str:
    seconds = max(0, int(time.time() - submitted_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _placement(job: dict) -> str:
    return " ".join(
        f"{t['hostname']}:{','.join(str(i) for i in t['gpu_ids'])}" for t in job["tasks"]
    )


#: widest a ``dlc jobs`` cell gets: one job's long name or message never pushes the rest away
CELL_WIDTHS = {"ID": 24, "USER": 20, "STATE": 9, "NAME": 32, "GPUS": 8, "PLACED ON": 40}
MESSAGE_WIDTH = 50


def cell(value, width: int):
    """A table cell: plain text (no rich markup), control characters blanked, cut to ``width``.

    Job fields come from users and container output; ``[bold]`` or a NUL in one of them must
    not restyle, break or widen the listing of everyone's jobs.
    """
    from rich.text import Text

    text = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in str(value))
    if len(text) > width:
        text = text[: width - 1] + "\u2026"
    return Text(text)


@click.command("jobs")
@click.option("--limit", "-n", type=click.IntRange(1), default=50, show_default=True,
              help="Show the newest N jobs.")  # fmt: skip
@click.option("--all", "show_all", is_flag=True, help="Show every job (pages through the API).")
@api_options
def jobs(api, token, limit, show_all):
    """List your jobs, newest first (all users' jobs with an admin token)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in (*CELL_WIDTHS, "AGE"):
        table.add_column(col, no_wrap=True)
    table.add_column("MESSAGE", no_wrap=True, overflow="ellipsis", max_width=MESSAGE_WIDTH)
    for job in ApiClient(api, token).jobs(limit=None if show_all else limit):
        gpus = str(job["gpus"]) if job["nodes"] == 1 else f"{job['nodes']}x{job['gpus']}"
        values = (job["id"], job["user"], job["state"], job["name"], gpus, _placement(job))
        table.add_row(
            *(cell(v, w) for v, w in zip(values, CELL_WIDTHS.values(), strict=True)),
            _age(job["submitted_at"]),
            cell(job["message"], 4 * MESSAGE_WIDTH),
        )
    Console(width=max(150, Console().width)).print(table)


@click.command("status")
@click.argument("job_id")
@api_options
def status(job_id, api, token):
    """Show one job: spec, placement and state history."""
    job = ApiClient(api, token).show(job_id)
    rows = [
        ("id", job["id"]),
        ("user", job["user"]),
        ("state", job["state"]),
        ("what", job["framework"] or job["image"]),
        ("image", job["image"]),
        ("gpus", f"{job['gpus']} x {job['nodes']} node(s)"),
        ("placed on", _placement(job) or "-"),
        ("attempt", f"{job['attempt']} (failures {job['failures']}, retries {job['retries']})"),
        ("command", " ".join(job["command"]) or "(image default)"),
        ("message", job["message"]),
    ]
    for key, value in rows:
        click.echo(f"{key:>10}: {value}")
    click.echo("   history:")
    for item in job.get("history", ()):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["at"]))
        click.echo(f"    {stamp} {item['state']:<9} {item['message']}")


@click.command("kill")
@click.argument("job_id")
@api_options
def kill(job_id, api, token):
    """Kill a job (its container is stopped; a queued job never starts)."""
    job = ApiClient(api, token).kill(job_id)
    click.echo(f"{job['id']} {job['state']}{' (kill requested)' if not _done(job) else ''}")


def _done(job: dict) -> bool:
    return job["state"] in ("finished", "failed", "killed", "lost")


@click.command("logs")
@click.argument("job_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--interval", type=float, default=1.0, show_default=True, hidden=True)
@api_options
def logs(job_id, follow, use_stderr, interval, api, token):
    """Print a job's container output (stdout, or --stderr)."""
    client = ApiClient(api, token)
    stream = "stderr" if use_stderr else "stdout"
    offset = 0
    while True:
        chunk = client.logs(job_id, stream, offset)
        if chunk["data"]:
            sys.stdout.write(chunk["data"])
            sys.stdout.flush()
        offset = chunk["offset"]
        if chunk["data"]:
            continue  # more may be waiting beyond this chunk
        if not follow or chunk["done"]:
            break
        time.sleep(interval)


command = submit
