"""``dlc setup-host``: the systemd units, example settings and docs that ship in the package.

The wheel installs them as data files under ``<prefix>/share/dlc/`` (``/opt/dlc/venv/share/dlc``
for the venv of docs/install.md), so an operator needs no source checkout:

    dlc setup-host files                      # every shipped file and where it lies
    dlc setup-host print dlc-scheduler.service
    sudo dlc setup-host install scheduler     # unit -> /etc/systemd/system, settings -> /etc/dlc
    sudo dlc setup-host loopback-guard        # the agent's nftables guard (dlc-mesos-agent does it)

From a source checkout (an editable install has no data files) the same files are read from
``packaging/``, ``docs/`` and ``examples/``.
"""

from __future__ import annotations

import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import click

from dlc.errors import DlcError
from dlc.executor.loopback_guard import (
    DEFAULT_OPEN_PORTS,
    DEFAULT_UIDS,
    TABLE,
    GuardMode,
    GuardSettings,
    LoopbackGuard,
    port_list,
    ruleset,
)

#: the folder under the install prefix the wheel's data files go to (setup.cfg data_files)
SHARE = Path("share", "dlc")
#: shipped folder -> where a source checkout keeps it
CHECKOUT_LAYOUT = {"systemd": "packaging/systemd", "docs": "docs", "examples": "examples"}


@dataclass(frozen=True)
class Role:
    """What one kind of host gets: a systemd unit and its settings file."""

    unit: str
    settings: str


ROLES = {
    "scheduler": Role("dlc-scheduler.service", "scheduler.env"),
    "agent": Role("dlc-mesos-agent.service", "agent.env"),
    "master": Role("dlc-mesos-master.service", "master.env"),
}


def share_dir() -> Path:
    """The folder holding ``systemd/``, ``docs/`` and ``examples/`` for this install.

    Raises:
        DlcError: neither the installed data files nor a source checkout are there.
    """
    installed = Path(sysconfig.get_path("data")) / SHARE
    if (installed / "systemd").is_dir():
        return installed
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / CHECKOUT_LAYOUT["systemd"]).is_dir():
        return checkout
    raise DlcError(
        f"no DLC data files under {installed}: reinstall DLC from its wheel (make dist), "
        "not as an editable install"
    )


def shipped_files(root: Path) -> dict[str, Path]:
    """File name -> path of every shipped file (units, settings, docs, examples, README)."""
    files: dict[str, Path] = {}
    installed = (root / "systemd").is_dir()
    for kind, folder in CHECKOUT_LAYOUT.items():
        base = root / (kind if installed else folder)
        pattern = "*.md" if kind == "docs" else "*"
        for path in sorted(base.glob(pattern)):
            if path.is_file():
                files.setdefault(path.name, path)
    readme = root / "README.md"
    if readme.is_file():
        files["README.md"] = readme
    return files


def install_role(role: Role, files: dict[str, Path], unit_dir: Path, etc_dir: Path,
                 force: bool) -> list[str]:  # fmt: skip
    """Copy ``role``'s unit into ``unit_dir`` and its settings into ``etc_dir``.

    An existing settings file is kept (it holds the operator's values) unless ``force``;
    the unit is always replaced, since it belongs to the installed DLC version. Settings
    files are made mode 0600: systemd reads them as root, and they may hold secrets.

    Returns:
        One line per file: what was done with it.
    """
    unit_dir.mkdir(parents=True, exist_ok=True)
    etc_dir.mkdir(parents=True, exist_ok=True)
    done = []
    unit = unit_dir / role.unit
    shutil.copyfile(files[role.unit], unit)
    unit.chmod(0o644)
    done.append(f"installed {unit}")
    settings = etc_dir / role.settings
    if settings.exists() and not force:
        done.append(f"kept      {settings} (exists; --force replaces it)")
    else:
        shutil.copyfile(files[role.settings], settings)
        settings.chmod(0o600)
        done.append(f"installed {settings} (edit it before starting the service)")
    return done


@click.group("setup-host")
def command():
    """The systemd units, example settings and docs shipped in the DLC package."""


@command.command("files")
def list_files():
    """List every shipped file with its path."""
    for name, path in shipped_files(share_dir()).items():
        click.echo(f"{name:32} {path}")


@command.command("print")
@click.argument("name")
def print_file(name):
    """Print one shipped file (a unit, a settings file, a doc such as install.md)."""
    files = shipped_files(share_dir())
    if name not in files:
        known = ", ".join(files)
        raise DlcError(f"no shipped file {name!r}; choose one of: {known}")
    click.echo(files[name].read_text(), nl=False)


@command.command("docs")
def docs_dir():
    """Print the folder of the installed documentation (install.md, cli.md, ...)."""
    root = share_dir()
    click.echo(root / ("docs" if (root / "systemd").is_dir() else CHECKOUT_LAYOUT["docs"]))


@command.command("install")
@click.argument("role", type=click.Choice(sorted(ROLES)))
@click.option(
    "--unit-dir",
    envvar="DLC_SETUP_UNIT_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/etc/systemd/system"),
    show_default=True,
    help="Where the systemd unit goes (env DLC_SETUP_UNIT_DIR).",
)
@click.option(
    "--etc-dir",
    envvar="DLC_SETUP_ETC_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/etc/dlc"),
    show_default=True,
    help="Where the settings file goes (env DLC_SETUP_ETC_DIR).",
)
@click.option("--force", is_flag=True, help="Replace an existing settings file too.")  # fmt: skip
def install(role, unit_dir, etc_dir, force):
    """Install ROLE's unit and settings file (scheduler, agent or master)."""
    try:
        lines = install_role(ROLES[role], shipped_files(share_dir()), unit_dir, etc_dir, force)
    except PermissionError as exc:
        raise DlcError(f"cannot write {exc.filename}: run it as root (sudo)") from None
    for line in lines:
        click.echo(line)
    click.echo(f"next: systemctl daemon-reload && systemctl enable --now {ROLES[role].unit}")


@command.command("loopback-guard")
@click.option(
    "--print",
    "print_only",
    is_flag=True,
    help="Print the nft script instead of loading it (for /etc/nftables.d).",
)
@click.option(
    "--uids",
    default=DEFAULT_UIDS,
    show_default=True,
    help="The uids held (those containers run as).",
)
@click.option(
    "--open-ports",
    default=",".join(DEFAULT_OPEN_PORTS),
    show_default=True,
    help="Loopback ports left open to them: DNS and the agent's Mesos port range.",
)
def loopback_guard(print_only, uids, open_ports):
    """Keep host-network jobs off this agent's loopback services (nftables, as root).

    Loads table inet dlc_loopback_guard: new connections and datagrams from the given uids to
    127.0.0.0/8 and ::1 are refused except to the open ports. dlc-mesos-agent.service runs
    it before each start; executors run with DLC_LOOPBACK_GUARD=enforce reinstall it before
    every host-network container.
    """
    ports = port_list(open_ports)
    guard = LoopbackGuard(GuardMode.ENFORCE, GuardSettings(uids, ports))
    if print_only:
        click.echo(ruleset(guard.settings), nl=False)
        return
    guard.install()
    click.echo(f"installed nft table inet {TABLE}: uids {uids} refused on loopback except "
               f"ports {', '.join(ports)}")  # fmt: skip
