"""`dlc setup-host`: the units, settings and docs shipped in the package, printed and installed."""

from __future__ import annotations

import stat
from pathlib import Path

from click.testing import CliRunner

from dlc.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    return CliRunner().invoke(cli, ["setup-host", *args])


def test_files_lists_units_settings_and_docs():
    out = _run("files")
    assert out.exit_code == 0, out.output
    names = [line.split()[0] for line in out.output.splitlines()]
    units = ("dlc-scheduler.service", "dlc-mesos-agent.service", "dlc-mesos-master.service")
    for name in (*units, "scheduler.env", "agent.env", "master.env", "install.md", "README.md"):
        assert name in names


def test_print_gives_the_file_and_names_the_choices_on_a_typo():
    out = _run("print", "dlc-scheduler.service")
    assert out.output == (ROOT / "packaging/systemd/dlc-scheduler.service").read_text()
    bad = _run("print", "nosuch.service")
    assert bad.exit_code == 1 and "no shipped file 'nosuch.service'" in bad.output
    assert "dlc-scheduler.service" in bad.output


def test_install_puts_the_unit_and_keeps_the_operators_settings(tmp_path):
    units, etc = tmp_path / "systemd", tmp_path / "etc"
    out = _run("install", "scheduler", "--unit-dir", str(units), "--etc-dir", str(etc))
    assert out.exit_code == 0, out.output
    settings = etc / "scheduler.env"
    assert (units / "dlc-scheduler.service").read_text().startswith("# DLC scheduler")
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # systemd reads it as root
    settings.write_text("DLC_MASTER=198.51.100.2:5050\n")
    again = _run("install", "scheduler", "--unit-dir", str(units), "--etc-dir", str(etc))
    assert "kept" in again.output and settings.read_text() == "DLC_MASTER=198.51.100.2:5050\n"
    forced = _run("install", "scheduler", "--unit-dir", str(units), "--etc-dir", str(etc),
                  "--force")  # fmt: skip
    assert forced.exit_code == 0 and "DLC_API_ADVERTISE_URL" in settings.read_text()


def test_units_point_their_documentation_at_the_installed_docs():
    for unit in ("dlc-scheduler.service", "dlc-mesos-agent.service", "dlc-mesos-master.service"):
        text = (ROOT / "packaging/systemd" / unit).read_text()
        doc = "Documentation=file:///opt/dlc/venv/share/dlc/docs/install.md"
        assert doc in text, unit
    # ... which is where the wheel puts them (setup.cfg data_files -> <prefix>/share/dlc/docs)
    assert "share/dlc/docs = docs/*.md" in (ROOT / "setup.cfg").read_text()
