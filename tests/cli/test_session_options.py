"""`dlc scheduler --max-sessions-per-user/--max-sessions/--session-*`: they reach the service,
and a bad value names the option."""

from __future__ import annotations

from click.testing import CliRunner

from dlc.api.shell_relay import SessionLimits
from dlc.cli.main import cli
from dlc.errors import DlcError


def test_the_session_options_reach_the_service(tmp_path, monkeypatch):
    seen = []

    class Captured:
        def __init__(self, config):
            seen.append(config)
            raise DlcError("captured")  # stop before anything starts

    monkeypatch.setattr("dlc.app.service.SchedulerService", Captured)
    args = ["scheduler", "--master", "m:5050", "--db", str(tmp_path / "db"),
            "--max-sessions-per-user", "2", "--max-sessions", "9",
            "--session-idle-timeout", "60", "--session-max-time", "600"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert "captured" in result.output
    assert seen[0].sessions == SessionLimits(per_user=2, total=9, idle_s=60, max_s=600)
    CliRunner().invoke(cli, args[:5])
    assert seen[1].sessions == SessionLimits()  # the defaults


def test_a_bad_session_cap_names_the_option():
    result = CliRunner().invoke(cli, ["scheduler", "--master", "m:5050",
                                      "--max-sessions-per-user", "0"])  # fmt: skip
    assert result.exit_code == 2
    assert "--max-sessions-per-user" in result.output and "0 is not in the range" in result.output
