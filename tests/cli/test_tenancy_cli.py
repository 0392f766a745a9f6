"""``dlc queue``, ``dlc quota``, ``dlc groups``, ``dlc nodes`` against a real API server."""

from __future__ import annotations

from click.testing import CliRunner

from dlc.cli.main import cli
from tests.api.test_tenancy_routes import api  # noqa: F401  (fixture)


def dlc(server, token, *args, code=0):
    env = {"DLC_API": server.url, "DLC_TOKEN": token}
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == code, result.output
    return result.output


def test_admin_sets_up_groups_and_everyone_reads_them(api):  # noqa: F811
    server, core, tokens = api
    admin, alice = tokens["admin"], tokens["alice"]
    dlc(server, admin, "groups", "create", "team-a", "--pool", "train", "--preempt-within")
    dlc(server, admin, "groups", "add", "team-a", "alice", "carol")
    out = dlc(server, admin, "quota", "set", "team-a", "--pool", "train", "--gpus", "6",
              "--cpus", "40", "--mem", "256G", "--ceiling-gpus", "12")  # fmt: skip
    assert "team-a in pool train: 6 GPUs, 40 CPUs, 256G guaranteed" in out
    out = dlc(server, admin, "groups", "limit", "alice", "--max-running", "2",
              "--max-interactive", "28800", "--max-environments", "1")  # fmt: skip
    assert "alice: 2 running jobs" in out and "interactive 28800 s, 1 environments" in out
    out = dlc(server, admin, "quota", "grace", "45")
    assert "preemption grace 45 s for tasks launched from now on" in out
    groups = dlc(server, alice, "groups")
    assert "team-a" in groups and "alice, carol" in groups and "yes" in groups
    quota = dlc(server, alice, "quota")
    assert "pools: dev 4 GPUs, train 16 GPUs" in quota and "0/6" in quota
    nodes = dlc(server, alice, "nodes")
    assert "pool train: 16 of 16 GPUs free, 0 taken" in nodes
    assert "pool dev: 4 of 4 GPUs free" in nodes
    assert "no job is waiting" in dlc(server, alice, "queue")
    audit = dlc(server, admin, "quota", "audit")
    assert "limits" in audit and "quota" in audit and "root" in audit


def test_a_user_cannot_change_quotas_and_gets_one_line(api):  # noqa: F811
    server, _, tokens = api
    out = dlc(server, tokens["alice"], "quota", "set", "team-a", "--pool", "train", "--gpus",
              "99", code=1)  # fmt: skip
    assert out.strip().splitlines() == [
        "Error: changing groups, quotas or limits needs an admin token"
    ]
