"""``dlc cleanup``: remove DLC containers left behind on this host's Docker engine."""

from __future__ import annotations

import click

from dlc.errors import DlcError
from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK


@click.command(name="cleanup")
@click.option("--all", "everything", is_flag=True, help="Every DLC container on this engine.")
@click.option("--framework", "framework_id", metavar="ID", help="Containers of one framework id.")
@click.option("--executor", "executor_id", metavar="ID", help="Containers of one executor id.")
@click.option(
    "--grace",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL for running containers.",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
def command(
    everything: bool, framework_id: str | None, executor_id: str | None, grace: float, dry_run: bool
) -> None:
    """Stop and remove orphaned DLC job containers (selected by their dlc.* labels).

    Running job containers are removed too: use it when the executors that own them are gone
    (a killed executor's reaper normally does this by itself).
    """
    if not (everything or framework_id or executor_id):
        raise DlcError("cleanup: say which containers: --all, --framework ID or --executor ID")
    from dlc.executor.runtime import DockerRuntime

    labels: dict[str, str | None] = {LABEL_FRAMEWORK: framework_id}
    if executor_id:
        labels[LABEL_EXECUTOR] = executor_id
    runtime = DockerRuntime()
    found = runtime.list_containers(labels)
    for info in found:
        job = info.labels.get("dlc.job", "?")
        click.echo(
            f"{'would remove' if dry_run else 'removing'} {info.id[:12]} {info.name} "
            f"(job {job}, {info.status})"
        )
    if not dry_run:
        runtime.remove_all(found, grace)
    click.echo(f"{len(found)} container(s) {'found' if dry_run else 'removed'}")
