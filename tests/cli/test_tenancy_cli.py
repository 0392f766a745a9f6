"""``dlc queue``, ``dlc quota``, ``dlc groups``, ``dlc nodes`` against a real API server."""

from __future__ import annotations

from click.testing import CliRunner

from dlc.api.client import ApiClient
from dlc.api.tenancy_routes import AUDIT_REFUSAL
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
    out = dlc(server, tokens["alice"], "quota", "audit", code=1)  # a read: says reading
    assert out.strip().splitlines() == [f"Error: {AUDIT_REFUSAL}"]
    assert AUDIT_REFUSAL.startswith("reading the quota audit needs an admin token; ask an admin")


def test_every_listing_takes_o_json(api):  # noqa: F811
    import json

    server, _, tokens = api
    admin = tokens["admin"]
    dlc(server, admin, "groups", "create", "team-a", "--pool", "train")
    dlc(server, admin, "quota", "set", "team-a", "--pool", "train", "--gpus", "6")
    groups = json.loads(dlc(server, admin, "groups", "-o", "json"))
    assert groups == [{"name": "team-a", "members": [], "default_pool": "train",
                       "preempt_within": False}]  # fmt: skip
    quota = json.loads(dlc(server, admin, "quota", "-o", "json"))
    assert quota["quotas"][0]["group"] == "team-a" and quota["pools"]["train"]["gpus"] == 16
    nodes = json.loads(dlc(server, admin, "nodes", "-o", "json"))
    assert {n["agent_id"]: n["free"] for n in nodes} == {"a1": 8, "a2": 8, "d1": 4}
    assert json.loads(dlc(server, admin, "queue", "-o", "json")) == []
    assert json.loads(dlc(server, admin, "quota", "audit", "-o", "json"))[0]["action"]
    assert "- name: team-a" in dlc(server, admin, "groups", "-o", "yaml")


def test_a_group_with_an_unknown_pool_is_refused_naming_the_known_ones(api):  # noqa: F811
    server, _, tokens = api
    out = dlc(server, tokens["admin"], "groups", "create", "team-c", "--pool", "nosuchpool",
              code=1)  # fmt: skip
    assert out.strip().splitlines() == [
        "Error: --pool nosuchpool: no agent or quota has that pool; known pools: dev, train "
        "(agents join one with the dlc_pool attribute)"
    ]
    assert "team-c" not in dlc(server, tokens["admin"], "groups")


def test_nodes_show_gpus_held_by_shares(api):  # noqa: F811
    import json

    from dlc.scheduler.jobs.job import JobSpec
    from tests.api.test_tenancy_routes import slave
    from tests.scheduler.placement.test_share_placement import ranged_offer

    server, core, tokens = api
    a1 = slave("a1", "train")
    stride = 1 << 20
    a1["resources"]["gpu_mem"] = "[" + ", ".join(
        f"{i * stride}-{i * stride + 32767}" for i in range(8)) + "]"  # fmt: skip
    a1["resources"]["gpu_core"] = "[" + ", ".join(
        f"{i * stride}-{i * stride + 999}" for i in range(8)) + "]"  # fmt: skip
    core.update_agents([a1, slave("a2", "train"), slave("d1", "dev", 4)])
    for _ in range(3):
        core.submit("alice", JobSpec.from_dict({"image": "b", "cpus": 0.1, "mem_mib": 64,
                                                "gpu_memory": "4G"}))  # fmt: skip
    result = core.on_offers([ranged_offer("o1", "a1")])
    assert sum(len(infos) for _, infos in result.accepts) == 3
    (a1,) = [n for n in json.loads(dlc(server, tokens["alice"], "nodes", "-o", "json"))
             if n["agent_id"] == "a1"]  # fmt: skip
    assert (a1["shared"], a1["share_mem_mib"], a1["taken"], a1["free"]) == (1, 12288, 0, 7)
    table = dlc(server, tokens["alice"], "nodes")
    assert "1 (12 GiB)" in table and "pool train: 15 of 16 GPUs free, 0 taken, 1 shared" in table


def test_a_user_asking_for_another_users_jobs_is_told_only_admins_can(api):  # noqa: F811
    server, _, tokens = api
    out = dlc(server, tokens["alice"], "jobs", "--user", "bob", code=1)
    assert out.strip().splitlines() == [
        "Error: --user bob: only admins can list other users' jobs; your token is alice's "
        "(drop --user, or use an admin token)"
    ]
    assert dlc(server, tokens["alice"], "jobs", "--user", "alice").startswith("ID")
    assert dlc(server, tokens["admin"], "jobs", "--user", "bob").startswith("ID")


def test_quota_shows_decayed_usage_per_group_and_user(api):  # noqa: F811
    import json
    import time

    from dlc.scheduler.tenancy.fair_share import UsageRow
    from tests.api.test_tenancy_routes import configure

    server, core, tokens = api
    configure(server, tokens["admin"])  # team-a (alice) and team-b (bob), 6 GPUs each
    now = time.time()
    core.store.save_fair_usage([UsageRow("team-a", "alice", 12.0, now),
                                UsageRow("team-a", "carol", 3.0, now),
                                UsageRow("team-b", "bob", 1.5, now)], now)  # fmt: skip
    core.reload()  # as a leader taking over: the ledger is read from the store
    out = dlc(server, tokens["admin"], "quota")
    assert "fair share over time (decayed billed GPU-hours, half-life 7 d;" in out
    # the api fixture's agents: 20 GPUs, 192 CPUs, 768 GiB
    assert ("billed per hour: the largest of its GPUs, its CPUs / 9.6, its memory / 38.4 GiB "
            "(--fair-share-billing)") in out.splitlines()  # fmt: skip
    row = next(
        line for line in out.splitlines() if line.strip().startswith("team-a") and "alice" in line
    )
    assert row.split()[:5] == ["team-a", "15", "6", "2.5", "alice"]
    # a user sees every group's total but only their own user row
    body = json.loads(dlc(server, tokens["alice"], "quota", "-o", "json"))
    fair = {g["group"]: g for g in body["fair_share"]["groups"]}
    assert body["fair_share"]["half_life_s"] == 7 * 86400
    assert round(fair["team-b"]["gpu_hours"], 3) == 1.5 and fair["team-b"]["users"] == []
    assert [u["user"] for u in fair["team-a"]["users"]] == ["alice"]
    assert round(fair["team-a"]["ratio"], 3) == 2.5


def test_a_quota_for_a_pool_no_agent_has_is_set_with_a_note(api):  # noqa: F811
    # a pool may get its quota before its agents join (not refused), but not without a word
    server, _, tokens = api
    dlc(server, tokens["admin"], "groups", "create", "team-a", "--pool", "train")
    out = dlc(server, tokens["admin"], "quota", "set", "team-a", "--pool", "trian", "--gpus", "2")
    assert out.strip().splitlines()[-1] == (
        "note: --pool trian: no agent is in that pool yet (agents' pools: dev, train); the "
        "guarantee counts once agents join it (their dlc_pool attribute)"
    )
    quiet = dlc(server, tokens["admin"], "quota", "set", "team-a", "--pool", "train", "--gpus", "2")
    assert "note:" not in quiet


def test_the_billing_note_says_what_a_job_is_billed_and_where_the_ratio_came_from():
    from dlc.cli.quota_cmd import _billing_note

    gpu = {"unit": "GPU", "cpus_per_gpu": 8.0, "mem_mib_per_gpu": 32768.0}
    assert _billing_note(gpu) == ("billed per hour: the largest of its GPUs, its CPUs / 8, its "
                                  "memory / 32 GiB (--fair-share-billing)")  # fmt: skip
    gpus_only = {"unit": "GPU", "cpus_per_gpu": None, "mem_mib_per_gpu": None}
    assert _billing_note(gpus_only) == "billed per hour: its GPUs (--fair-share-billing)"
    # no GPU in the cluster: still GPU-hours (one unit), CPUs at the default ratio, said so
    cpu = {"unit": "GPU", "cpus_default": True, "cpus_per_gpu": 8.0, "mem_mib_per_gpu": 32768.0}
    assert _billing_note(cpu) == (
        "billed per hour: the largest of its GPUs, its CPUs / 8, its memory / 32 GiB (no GPU in "
        "the cluster: CPUs at the default ratio; --fair-share-billing cpus=N)"
    )
    assert "no agent known yet" in _billing_note(None)


def test_the_cpu_limit_is_set_and_said_and_a_zero_cap_is_not_shown_as_none(api):  # noqa: F811
    server, core, tokens = api
    out = dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", "32",
              "--max-running", "0")  # fmt: skip
    # 0 is a cap (nothing runs), "-" is none: "0 running jobs" was shown as "-" before
    assert out.strip() == (
        "alice: 0 running jobs, - GPUs, 32 CPUs, - memory, interactive - s, - environments at once"
    )
    assert core.tenancy.limits["alice"].max_cpus == 32
    out = dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", "-1", code=2)
    assert "--max-cpus" in out and "-1" in out
    out = dlc(server, tokens["alice"], "groups", "limit", "alice", "--max-cpus", "999", code=1)
    assert out.strip() == "Error: changing groups, quotas or limits needs an admin token"


def test_the_queue_shows_cpu_only_jobs_as_cpu_only_with_their_cpus(api):  # noqa: F811
    from tests.scheduler.helpers import offer

    server, core, tokens = api
    dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", "8")
    client = ApiClient(server.url, tokens["alice"])
    client.submit({"image": "busybox", "gpus": 0, "cpus": 6, "pool": "train"})
    core.on_offers([offer("o1", "a1", list(range(8)), cpus=64, mem=262144,
                          attrs={"dlc_pool": "train"})])  # fmt: skip
    waiting = client.submit({"image": "busybox", "gpus": 0, "cpus": 2.5, "nodes": 2,
                             "pool": "train"})  # fmt: skip
    lines = dlc(server, tokens["alice"], "queue", "-o", "wide").splitlines()
    assert lines[0].split() == ["POS", "ID", "USER", "GROUP", "POOL", "PRIO", "GPUS", "CPUS",
                                "REASON"]  # fmt: skip
    assert waiting["id"] in lines[1] and "2x CPU only  5 " in lines[1]
    assert lines[1].endswith(
        "user alice holds 6.1 of 8 CPUs allowed; this job needs 5.2 (each task's executor included)"
    )


def test_a_nan_or_infinite_cpu_limit_from_the_cli_is_one_line_and_nothing_changes(api):  # noqa: F811
    server, core, tokens = api
    for text in ("nan", "inf"):
        out = dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", text,
                  code=1)  # fmt: skip
        assert out.strip().splitlines() == [
            f"Error: max_cpus: {text} is out of range; give 0 to 1000000000, or leave it out "
            "for no cap"
        ]
    assert "alice" not in core.tenancy.limits


def test_dlc_quota_shows_the_callers_own_limits_with_what_they_hold(api):  # noqa: F811
    from tests.scheduler.helpers import offer

    server, core, tokens = api
    dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", "16",
        "--max-interactive", "3600")  # fmt: skip
    dlc(server, tokens["admin"], "groups", "limit", "bob", "--max-gpus", "2")
    ApiClient(server.url, tokens["alice"]).submit({"image": "busybox", "gpus": 1, "cpus": 6,
                                                   "pool": "train"})  # fmt: skip
    core.on_offers([offer("o1", "a1", list(range(8)), cpus=64, mem=262144,
                          attrs={"dlc_pool": "train"})])  # fmt: skip
    out = dlc(server, tokens["alice"], "quota", "-o", "wide")
    lines = out.splitlines()
    at = lines.index(
        "user limits (`dlc groups limit`; held now/cap, -: no cap; CPUs and "
        "memory with each task's executor):"
    )
    assert lines[at + 1 : at + 3] == [  # 6 CPUs and 1 GiB asked, 0.1 and 64 MiB its executor's
        "USER   JOBS  GPUS  CPUS    MEMORY     ENVIRONMENTS  LONGEST INTERACTIVE",
        "alice  1/-   1/-   6.1/16  1.0625G/-  0/-           3600 s",
    ]
    assert "bob" not in out
    admin = dlc(server, tokens["admin"], "quota", "-o", "wide").splitlines()
    assert "bob    0/-   0/2   0/-     0G/-       0/-           -" in admin


def test_setting_one_limit_keeps_the_others(api):  # noqa: F811
    server, core, tokens = api
    admin = tokens["admin"]
    dlc(server, admin, "groups", "limit", "alice", "--max-gpus", "4", "--max-running", "2")
    out = dlc(server, admin, "groups", "limit", "alice", "--max-cpus", "16")
    assert out.strip() == (
        "alice: 2 running jobs, 4 GPUs, 16 CPUs, - memory, interactive - s, - environments at once"
    )
    assert core.tenancy.limits["alice"].max_gpus == 4
    audit = dlc(server, admin, "quota", "audit")
    assert "changed=['max_cpus']" in audit


def test_none_removes_one_limit_and_clear_removes_all(api):  # noqa: F811
    server, core, tokens = api
    admin = tokens["admin"]
    dlc(server, admin, "groups", "limit", "alice", "--max-gpus", "4", "--max-cpus", "16")
    out = dlc(server, admin, "groups", "limit", "alice", "--max-gpus", "none")
    assert out.strip() == (
        "alice: - running jobs, - GPUs, 16 CPUs, - memory, interactive - s, - environments at once"
    )
    # no option: what alice has now, read back
    assert dlc(server, admin, "groups", "limit", "alice") == out
    # --clear with options: only those
    out = dlc(server, admin, "groups", "limit", "alice", "--clear", "--max-running", "1")
    assert out.startswith("alice: 1 running jobs, - GPUs, - CPUs,")
    assert dlc(server, admin, "groups", "limit", "alice", "--clear").strip() == "alice: no limits"
    assert "alice" not in core.tenancy.limits
    out = dlc(server, admin, "groups", "limit", "alice", "--clear")
    assert out.strip() == "alice: no limits (there were none)"
    assert dlc(server, admin, "groups", "limit", "alice").strip() == "alice: no limits"


def test_a_bad_limit_names_the_option_and_a_user_may_not_clear_theirs(api):  # noqa: F811
    server, core, tokens = api
    dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-cpus", "4")
    out = dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-gpus", "lots", code=2)
    assert out.splitlines() == [
        "Error: Invalid value for '--max-gpus': 'lots': give a number of 0 or more, or none for "
        "no cap (see 'cli groups limit --help')"
    ]
    out = dlc(server, tokens["admin"], "groups", "limit", "alice", "--max-running", "1.5", code=2)
    assert "'--max-running': '1.5': give a whole number of 0 or more, or none" in out
    out = dlc(server, tokens["alice"], "groups", "limit", "alice", "--clear", code=1)
    assert out.strip() == "Error: changing groups, quotas or limits needs an admin token"
    out = dlc(server, tokens["alice"], "groups", "limit", "alice", "--max-cpus", "none", code=1)
    assert out.strip() == "Error: changing groups, quotas or limits needs an admin token"
    assert core.tenancy.limits["alice"].max_cpus == 4
    # reading is not changing: alice sees hers, not bob's
    out = dlc(server, tokens["alice"], "groups", "limit", "alice")
    assert out.startswith("alice: - running jobs, - GPUs, 4 CPUs")
    out = dlc(server, tokens["alice"], "groups", "limit", "bob", code=1)
    assert out.strip() == "Error: reading another user's limits needs an admin token"


def test_the_memory_limit_takes_a_size_and_none(api):  # noqa: F811
    """Red-team finding 56: --max-mem 256G is 262144 MiB; none removes it; a bad size is one
    line naming the option."""
    server, core, tokens = api
    admin = tokens["admin"]
    out = dlc(server, admin, "groups", "limit", "alice", "--max-mem", "256G", "--max-cpus", "8")
    assert out.strip() == (
        "alice: - running jobs, - GPUs, 8 CPUs, 256G memory, interactive - s, - environments "
        "at once"
    )
    assert core.tenancy.limits["alice"].max_mem_mib == 262144
    dlc(server, admin, "groups", "limit", "alice", "--max-mem", "none")
    assert core.tenancy.limits["alice"].max_mem_mib is None
    assert core.tenancy.limits["alice"].max_cpus == 8
    out = dlc(server, admin, "groups", "limit", "alice", "--max-mem", "lots", code=2)
    assert out.splitlines() == [
        "Error: Invalid value for '--max-mem': 'lots': give a size such as 256G or 4096 (MiB) "
        "of 0 or more, or none for no cap (see 'cli groups limit --help')"
    ]


def test_a_limit_on_an_unknown_name_warns_on_stderr_in_one_line_and_is_stored(api):  # noqa: F811
    server, core, tokens = api
    env = {"DLC_API": server.url, "DLC_TOKEN": tokens["admin"]}
    result = CliRunner().invoke(cli, ["groups", "limit", "alcie", "--max-cpus", "8"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: user 'alcie': no token, group member or job has that name (did you mean "
        "alice?); the limits are stored and apply once a user of that name submits; `dlc "
        "groups limit alcie --clear` removes them"
    ]
    assert result.stdout.startswith("alcie: - running jobs, - GPUs, 8 CPUs")
    assert core.tenancy.limits["alcie"].max_cpus == 8
    known = CliRunner().invoke(cli, ["groups", "limit", "alice", "--max-cpus", "8"], env=env)
    assert known.exit_code == 0 and known.stderr == ""


def test_adding_an_unknown_member_warns_on_stderr_in_one_line_and_adds_it(api):  # noqa: F811
    server, core, tokens = api
    env = {"DLC_API": server.url, "DLC_TOKEN": tokens["admin"]}
    dlc(server, tokens["admin"], "groups", "create", "team-a", "--pool", "train")
    result = CliRunner().invoke(cli, ["groups", "add", "team-a", "alice", "alcie"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: user 'alcie': no token, group member or job has that name (did you mean "
        "alice?); added to team-a all the same; `dlc groups remove team-a alcie` takes the "
        "name out"
    ]
    assert result.stdout == "team-a: added alice, alcie\n"
    assert core.tenancy.group_of("alcie") == "team-a"
    known = CliRunner().invoke(cli, ["groups", "add", "team-a", "alice"], env=env)
    assert known.exit_code == 0 and known.stderr == ""
