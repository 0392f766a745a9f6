"""``dlc local``: Mesos emulator + scheduler + API on this machine, no Mesos install."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from dlc.app.interpreter import tune_interpreter
from dlc.cli.scheduler_cmd import (
    POLICY,
    PORT,
    absolute_prefixes,
    admin_token_from,
    admin_token_options,
    configure_logging,
    port_in_use_error,
    print_login,
    share_hold_options,
    stop_on_signals,
    warn_state_prefixes,
)
from dlc.errors import DlcError
from dlc.executor.state_paths import StatePath


@click.command("local")
@click.option("--simulate", metavar="FILE", multiple=True,
              help="Simulate the machine of a topo -m (or amd-smi/rocm-smi) file; repeat it "
              "for a mixed pool, one agent per file.")  # fmt: skip
@click.option("--work-dir", default=".dlc-local", show_default=True, help="State directory.")
@click.option("--api-port", type=PORT, default=8642, show_default=True, help="API port (0: any).")
@click.option("--mesos-port", type=PORT, default=0, help="Emulator port (default: any free).")
@click.option("--policy", type=POLICY, default="tree", show_default=True, help="GPU placement.")
@click.option(
    "--cpus", type=float, help="Agent CPUs [default: this host's; simulated: >= 4.1 per GPU]."
)
@click.option("--mem", "mem_mib", metavar="SIZE",
              help="Agent memory: 256G, 65536 (MiB) [default: host's; simulated: >= 16448 MiB "
              "per GPU].")  # fmt: skip
@click.option("--gpu-model", metavar="MODEL",
              help="Model the GPUs advertise (for --gpu-model jobs) [default: one named in "
              "the --simulate file's name, e.g. V100 for dgx1-v100.txt].")  # fmt: skip
@click.option("--gpu-mem", "gpu_mem_mib", type=click.IntRange(1), metavar="MIB",
              help="Each simulated GPU's memory (a topo -m file has none): the agent then "
                   "takes GPU shares (--gpus 0.5, --gpu-memory 4G).")  # fmt: skip
@click.option(
    "--agents",
    type=int,
    default=1,
    show_default=True,
    metavar="N",
    help="Run N alike simulated agents per --simulate file, e.g. 2 for two machines.",
)
@click.option("--device-root", hidden=True, metavar="DIR",
              help="Stand-in kfd/dri nodes for simulated AMD agents' containers.")  # fmt: skip
@click.option("--allow-volume", multiple=True, callback=absolute_prefixes,
              help="Host path prefix jobs may mount (never DLC's own state below it, "
                   "such as /run/dlc-mps under /run).")  # fmt: skip
@click.option("--token-file", help="Also write the admin token to this file (mode 600).")
@admin_token_options
@share_hold_options
@click.option("--executor-command", hidden=True, help="Replace `python -m dlc executor`.")
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG.")
def command(simulate, work_dir, api_port, mesos_port, policy, cpus, mem_mib, gpu_model,
            gpu_mem_mib, agents, device_root, allow_volume, token_file, admin_token_file,
            share_hold_reserve, share_hold_fill, share_hold_max_wait, executor_command,
            verbose):  # fmt: skip
    """Run a Mesos emulator, its agent(s) and the DLC scheduler here, until interrupted.

    The agent offers this host's GPUs, or with --simulate FILE the GPUs and
    topology of the machine an `nvidia-smi topo -m` (or `amd-smi`/`rocm-smi`) output
    describes. Repeat --simulate for a mixed pool, e.g. a DGX-1 beside an MI300X:
    `--simulate examples/topologies/dgx1-v100.txt
    --simulate examples/topologies/mi300x-amd-smi.json`.
    """
    from dlc.app.local import LocalCluster, LocalConfig
    from dlc.app.service import write_token_file
    from dlc.scheduler.placement.share_hold import ShareHoldSettings

    configure_logging(verbose, logging.WARNING)
    if mem_mib is not None:
        from dlc.cli.submit_cmd import parse_mem

        mem_mib = parse_mem(mem_mib, "an agent")  # `--mem 32` was an agent of 32 MiB
    config = LocalConfig(
        simulate=tuple(simulate) or None,
        work_dir=work_dir,
        api_port=api_port,
        mesos_port=mesos_port,
        policy=policy,
        cpus=cpus,
        mem_mib=mem_mib,
        gpu_model=gpu_model,
        gpu_mem_mib=gpu_mem_mib,
        agents=agents,
        device_root=device_root,
        executor_command=executor_command,
        allowed_volumes=tuple(allow_volume),
        admin_token=admin_token_from(admin_token_file),
        share_hold=ShareHoldSettings(share_hold_reserve, share_hold_fill, share_hold_max_wait),
    )
    work = StatePath(str(Path(work_dir).resolve()), "dlc local's work directory")
    warn_state_prefixes(tuple(allow_volume), (work,))
    try:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DlcError(f"--work-dir {work_dir}: cannot create it ({exc.strerror})") from None
    stop = stop_on_signals()  # before anything starts: a SIGTERM now still stops it cleanly
    tune_interpreter()  # the scheduler runs in this process, as in `dlc scheduler`
    try:
        cluster = LocalCluster(config).start()
    except OSError as exc:
        raise port_in_use_error(exc, api_port) from None
    try:
        service = cluster.service
        token = cluster.admin_token
        if token_file and token:
            write_token_file(token_file, token)
        click.echo(f"Mesos:     {cluster.emulator.url}/ (DLC's Mesos emulator, no Mesos web UI;")
        pool = pool_lines(cluster.topologies, simulate, agents)
        for n, line in enumerate(pool, 1):
            click.echo(f"           {line}{')' if n == len(pool) else ';'}")
        if cluster.ended_leftovers:
            click.echo(
                f"Ended {cluster.ended_leftovers} container(s) the previous dlc local left "
                "running; their jobs are retried if they have retries left.",
                err=True,
            )
        print_login(service.api_url, token if cluster.token_is_new else None, token_file)
        if admin_token_from(admin_token_file) is None and not cluster.token_is_new:
            saved = Path(work_dir) / "admin.token"
            if token:
                click.echo(f"  export DLC_TOKEN=$(cat {saved})   # the admin token saved earlier")
            else:  # stored hashed: a lost file cannot be re-read, only replaced
                click.echo(
                    f"  ({saved} is gone; make a new admin token with "
                    f"`dlc tokens create admin --admin --work-dir {work_dir}`)"
                )
        click.echo("Press Ctrl-C to stop.", err=True)
        stop.wait()
    finally:
        cluster.stop()


def pool_lines(topologies, files, agents: int) -> list[str]:
    """One line per simulated file (or this host): its agents' GPUs, vendor and model."""
    lines = []
    for topo, source in zip(topologies, files or (None,), strict=True):
        gpus = ",".join(str(i) for i in topo.gpu_indices)
        what = f"simulated from {source}" if source else "this host"
        models = sorted({g.model for g in topo.gpus if g.model})
        what += f", model {'/'.join(models)}" if models else ", no GPU model (see --gpu-model)"
        many = f"{agents} agents, each with " if agents > 1 else "agent "
        lines.append(f"{many}{topo.vendor} GPUs {gpus}, {what}")
    return lines
