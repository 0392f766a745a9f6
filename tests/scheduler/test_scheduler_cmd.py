"""`dlc scheduler`: token creation and one-line errors (the running service is tested in e2e)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.scheduler.store import JobStore


@pytest.mark.parametrize("admin, flag", [(False, []), (True, ["--admin"])])
def test_create_token_registers_a_working_token(tmp_path, admin, flag):
    db = tmp_path / "jobs.db"
    result = CliRunner().invoke(cli, ["scheduler", "--db", str(db), "--create-token", "bob", *flag])
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    assert JobStore(db).user_for_token(token) == ("bob", admin)


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param([], "--master is required", id="no-master"),
        pytest.param(
            ["--master", "m:5050", "--principal", "p"],
            "both --principal and --secret",
            id="principal-without-secret",
        ),  # fmt: skip
    ],
)
def test_bad_options_are_one_line(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["scheduler", "--db", str(tmp_path / "db"), *args])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1
