"""``dlc node-config``: print the ``mesos-agent`` flags that advertise this host's GPUs.

Run it on each agent host (or with ``--from-file`` for a saved ``nvidia-smi topo -m``)
and pass the output to ``mesos-agent``::

    mesos-agent --master=... $(dlc node-config --format args)
    mesos-agent --master=... $(dlc node-config --probe --format args)   # measured GB/s too
    eval "$(dlc node-config --format env)" && ../shared/mesos-local/start.sh ...
"""

from __future__ import annotations

import shlex

import click

from dlc.cli.output import emit
from dlc.topology.node_config import node_config

#: the resources ``--role`` reserves (CPUs and memory stay as the operator declares them)
GPU_NAMES = ("gpus", "gpu_ids", "gpu_mem", "gpu_core")


@click.command(name="node-config")
@click.option(
    "--from-file",
    metavar="FILE",
    help="Saved `nvidia-smi topo -m` output instead of this host's GPUs (NVML, else nvidia-smi).",
)
@click.option(
    "--p2p-file",
    metavar="FILE",
    help="Saved `nvidia-smi topo -p2p r` output to merge in (with --from-file).",
)
@click.option(
    "--probe",
    is_flag=True,
    help="Measure P2P bandwidth with the native probe (or read --probe-json) and carry "
    "the measured GB/s in dlc_topo, so placement ranks links by what they deliver.",
)
@click.option(
    "--probe-json",
    metavar="FILE",
    help="A saved probe run of this machine (`p2p_probe > FILE`) to use instead of "
    "running the probe now (implies --probe).",
)
@click.option("--cpus", type=float, metavar="N", help="Also declare cpus:N.")
@click.option("--mem", "mem_mib", type=int, metavar="MIB", help="Also declare mem:MIB.")
@click.option("--pool", metavar="NAME", help="Resource pool of this agent (dlc_pool): dev, train.")
@click.option("--rack", metavar="NAME", help="Rack of this agent (dlc_rack): gangs keep to one.")
@click.option(
    "--switch",
    metavar="NAME",
    help="Top-of-rack switch of this agent (dlc_switch): gangs prefer one switch, then one "
    "rack, then one zone (the zone is mesos-agent --domain).",
)
@click.option(
    "--role",
    metavar="ROLE",
    help="Reserve the GPUs (gpus, gpu_ids, gpu_mem, gpu_core) statically for this Mesos role: "
    "gpus(ROLE):N; run `dlc scheduler --role ROLE` (docs/roles.md).",
)
@click.option(
    "--sharing",
    type=click.Choice(["mps", "watchdog", "mig", "none", "shim"]),
    help="How this node enforces GPU shares, carried as the dlc_sharing attribute "
    "[default: mps where every GPU is Volta or later, else watchdog].",
)
@click.option(
    "--gpu-mem",
    "gpu_mem_mib",
    type=int,
    metavar="MIB",
    help="Memory of each GPU where the source does not say (a saved topo -m), for the "
    "gpu_mem ranges.",
)
@click.option(
    "-o",
    "--format",
    "fmt",
    type=click.Choice(["flags", "args", "env", "json", "yaml"]),
    default="flags",
    show_default=True,
    help="flags: shell-quoted, one per line; args: unquoted, for $(...); "
    "env: MESOS_RESOURCES=/MESOS_ATTRIBUTES= lines to eval or source; json/yaml: for programs.",
)
def command(
    from_file: str | None,
    p2p_file: str | None,
    probe: bool,
    probe_json: str | None,
    cpus: float | None,
    mem_mib: int | None,
    sharing: str | None,
    gpu_mem_mib: int | None,
    fmt: str,
    pool: str | None = None,
    role: str | None = None,
    rack: str | None = None,
    switch: str | None = None,
) -> None:
    """Print mesos-agent --resources (gpus, gpu_ids, gpu_mem, gpu_core) and --attributes."""
    # Imported here: live discovery may load pynvml, which `dlc --help` must not need.
    from dlc.topology.discovery.discover import discover

    topo = discover(from_file=from_file, p2p_file=p2p_file)
    if probe or probe_json is not None:
        from dlc.probe.merge import measured_topology  # the probe runs processes: lazy

        topo = measured_topology(topo, probe_json)
    config = node_config(topo, cpus=cpus, mem_mib=mem_mib, sharing=sharing, gpu_mem_mib=gpu_mem_mib)
    notes = []
    if topo.gpus and topo.vendor == "amd":
        notes.append("AMD GPUs: whole GPUs only, no share ranges (docs/sharing.md, AMD GPUs)")
    elif topo.gpus and "gpu_mem:" not in config.resources:
        notes.append(
            "gpu_mem/gpu_core left out (GPU memory unknown), so this agent takes no GPU "
            "shares; pass --gpu-mem MIB"
        )
    if role is not None:  # a GPU pool reserved for DLC's role (docs/roles.md)
        from dataclasses import replace

        from dlc.mesos.framework import check_roles
        from dlc.mesos.resources import reserve_items

        (role,) = check_roles([role])
        config = replace(config, resources=reserve_items(config.resources, role, GPU_NAMES))
    if pool is not None:  # quotas are per pool (docs/quotas.md)
        from dlc.scheduler.jobs.spec_fields import check_name
        from dlc.scheduler.tenancy.policy import POOL_ATTRIBUTE

        config.attributes[POOL_ATTRIBUTE] = check_name("pool", pool)
    # where the agent stands, for gang placement (docs/scheduler.md, gangs across racks)
    from dlc.scheduler.gangs.topology import ATTR_RACK, ATTR_SWITCH, check_place_name

    for name, kind, value in ((ATTR_RACK, "rack", rack), (ATTR_SWITCH, "switch", switch)):
        if value is not None:
            config.attributes[name] = check_place_name(kind, value)
    if fmt in ("json", "yaml"):
        doc = {
            "resources": config.resources,
            "attributes": config.attributes,
            "flags": config.flags(),
            "env": config.env(),
            "notes": notes,
        }
        emit(doc, fmt)
    elif fmt == "env":
        for name, value in config.env().items():
            click.echo(f"{name}={shlex.quote(value)}")
    elif fmt == "args":
        # Values never hold blanks, so $(...) word splitting keeps each flag whole.
        click.echo(" ".join(config.flags()))
    else:
        for flag in config.flags():
            name, _, value = flag.partition("=")
            click.echo(f"{name}={shlex.quote(value)}")
        for note in notes:  # after the flags; the machine-read formats stay clean
            click.echo(f"note: {note}", err=True)
