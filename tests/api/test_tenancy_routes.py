"""Tenancy routes over real loopback HTTP: admin-only changes, audit, views."""

from __future__ import annotations

import pytest

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.api.tenancy_routes import AUDIT_REFUSAL
from dlc.errors import ApiError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import UserLimits
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer


def slave(agent, pool, gpus=8):
    ids = ", ".join(str(i) for i in range(gpus))
    return {"id": agent, "hostname": f"host-{agent}", "active": True,
            "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": float(gpus),
                          "gpu_ids": "{" + ids + "}"},
            "attributes": {"dlc_pool": pool}}  # fmt: skip


@pytest.fixture
def api(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda s: (s.image, None))  # fmt: skip
    core.update_agents([slave("a1", "train"), slave("a2", "train"), slave("d1", "dev", 4)])
    server = ApiServer(core, LogReader(lambda: core.framework_id), lambda a: None)
    server.start()
    tokens = {"alice": store.add_token("alice"), "admin": store.add_token("root", admin=True)}
    yield server, core, tokens
    server.stop()


def call(server, token, method, path, body=None):
    return ApiClient(server.url, token)._call(method, path, body)


def configure(server, admin):
    call(server, admin, "POST", "/v1/groups", {"name": "team-a", "default_pool": "train"})
    call(server, admin, "POST", "/v1/groups", {"name": "team-b", "default_pool": "train"})
    call(server, admin, "POST", "/v1/groups/team-a/members", {"user": "alice"})
    call(server, admin, "POST", "/v1/groups/team-b/members", {"user": "bob"})
    for group in ("team-a", "team-b"):
        call(
            server,
            admin,
            "PUT",
            f"/v1/quota/{group}",
            {"pool": "train", "gpus": 6, "cpus": 40, "mem": "256G", "ceiling_gpus": 12},
        )


def test_admin_configures_groups_and_quotas_and_it_is_audited(api):
    server, core, tokens = api
    configure(server, tokens["admin"])
    quota = call(server, tokens["alice"], "GET", "/v1/quota")
    rows = {(r["group"], r["pool"]): r for r in quota["quotas"]}
    assert rows["team-a", "train"]["guaranteed"] == {"gpus": 6, "cpus": 40, "mem_mib": 262144}
    assert rows["team-a", "train"]["ceiling"]["gpus"] == 12
    assert quota["pools"]["train"]["gpus"] == 16
    audit = call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"]
    assert audit[0]["actor"] == "root" and audit[0]["action"] == "quota"
    assert core.tenancy.group_of("alice") == "team-a"


def test_users_may_not_change_quotas(api):
    server, _, tokens = api
    with pytest.raises(ApiError, match="needs an admin token"):
        call(server, tokens["alice"], "PUT", "/v1/quota/team-a", {"pool": "train", "gpus": 99})


def test_bad_quota_is_one_line_naming_the_field(api):
    server, _, tokens = api
    with pytest.raises(ApiError, match="group: no group 'nope'; create it with `dlc groups"):
        call(server, tokens["admin"], "PUT", "/v1/quota/nope", {"pool": "train", "gpus": 1})
    call(server, tokens["admin"], "POST", "/v1/groups", {"name": "g"})
    with pytest.raises(ApiError, match="mem: '12Q' is not a size"):
        call(server, tokens["admin"], "PUT", "/v1/quota/g", {"pool": "train", "mem": "12Q"})


def test_queue_shows_run_order_group_pool_and_reason(api):
    server, core, tokens = api
    configure(server, tokens["admin"])
    alice = ApiClient(server.url, tokens["alice"])
    first = alice.submit({"image": "busybox", "gpus": 6})
    second = alice.submit({"image": "busybox", "gpus": 8})
    core.on_offers([offer("o1", "a1", list(range(8)), cpus=64, mem=262144,
                          attrs={"dlc_pool": "train"})])  # fmt: skip
    rows = call(server, tokens["alice"], "GET", "/v1/queue")["queue"]
    assert [r["id"] for r in rows] == [second["id"]]
    row = rows[0]
    assert (row["position"], row["group"], row["pool"], row["admitted"]) == (
        1,
        "team-a",
        "train",
        False,
    )
    assert row["reason"] == (
        "team-a at its ceiling in pool train: holds 6 of 12 GPUs, this job needs 8"
    )
    nodes = call(server, tokens["alice"], "GET", "/v1/nodes")["nodes"]
    by_id = {n["agent_id"]: n for n in nodes}
    assert (by_id["a1"]["taken"], by_id["a1"]["free"], by_id["a1"]["pool"]) == (6, 2, "train")
    assert by_id["d1"]["pool"] == "dev"
    assert by_id["a1"]["gpu_vendor"] == "nvidia"  # agents without gpu_vendor are NVIDIA
    assert first["state"] == "queued"


def test_limits_are_stored(api):
    server, core, tokens = api
    out = call(server, tokens["admin"], "PUT", "/v1/limits/alice",
               {"max_running": 2, "max_gpus": 4, "max_interactive_s": 28800,
                "max_interactive": 1})  # fmt: skip
    assert out["max_running"] == 2 and out["max_interactive"] == 1
    assert core.tenancy.limits["alice"].max_interactive_s == 28800
    assert core.tenancy.limits["alice"].max_interactive == 1


def test_the_cpu_limit_is_stored_audited_and_answered(api):
    server, core, tokens = api
    out = call(server, tokens["admin"], "PUT", "/v1/limits/alice", {"max_cpus": 24.5})
    assert out["max_cpus"] == 24.5 and out["max_gpus"] is None
    assert core.tenancy.limits["alice"].max_cpus == 24.5
    audit = call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"]
    assert audit[0]["action"] == "limits" and audit[0]["detail"]["max_cpus"] == 24.5


@pytest.mark.parametrize(
    "body, match",
    [
        ({"max_cpus": -1}, "max_cpus: -1 is negative; give 0 or more"),
        ({"max_cpus": float("nan")}, "max_cpus: nan is out of range; give 0 to 1000000000"),
        ({"max_cpus": float("inf")}, "max_cpus: inf is out of range"),
        ({"max_cpus": 1e300}, r"max_cpus: 1e\+300 is out of range"),
        ({"max_running": 2**40}, "max_running: 1099511627776 is out of range"),
        ({"max_cpus": "8"}, "max_cpus"),  # a string is not a number: no coercion
        ({"max_cpu": 8}, "max_cpu"),  # a typo is refused, not ignored
    ],
)
def test_a_bad_limit_is_one_line_naming_the_field_and_nothing_changes(api, body, match):
    server, core, tokens = api
    with pytest.raises(ApiError, match=match) as err:
        call(server, tokens["admin"], "PUT", "/v1/limits/alice", body)
    assert "\n" not in str(err.value)
    assert "alice" not in core.tenancy.limits
    assert call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"] == []


def test_patch_changes_only_the_limits_given_and_null_removes_one(api):
    server, core, tokens = api
    admin = tokens["admin"]
    call(server, admin, "PUT", "/v1/limits/alice", {"max_running": 2, "max_gpus": 4})
    out = call(server, admin, "PATCH", "/v1/limits/alice", {"max_cpus": 16})
    assert out == {"user": "alice", "max_running": 2, "max_gpus": 4, "max_cpus": 16,
                   "max_mem_mib": None, "max_interactive_s": None,
                   "max_interactive": None}  # fmt: skip
    assert core.tenancy.limits["alice"] == UserLimits("alice", 2, 4, max_cpus=16)
    out = call(server, admin, "PATCH", "/v1/limits/alice", {"max_gpus": None})
    assert (out["max_running"], out["max_gpus"], out["max_cpus"]) == (2, None, 16)
    (entry,) = call(server, admin, "GET", "/v1/quota/audit?limit=1")["audit"]
    assert (entry["actor"], entry["action"]) == ("root", "limits")
    assert entry["detail"]["changed"] == ["max_gpus"] and entry["detail"]["max_cpus"] == 16
    # nothing given: nothing written, the limits answered
    assert call(server, admin, "PATCH", "/v1/limits/alice", {}) == out
    assert len(call(server, admin, "GET", "/v1/quota/audit")["audit"]) == 3


def test_a_user_reads_their_own_limits_and_an_admin_anyones(api):
    server, _, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_cpus": 4})
    mine = call(server, tokens["alice"], "GET", "/v1/limits/alice")
    assert mine["max_cpus"] == 4 and mine["max_gpus"] is None
    assert call(server, tokens["admin"], "GET", "/v1/limits/alice") == mine
    assert call(server, tokens["admin"], "GET", "/v1/limits/bob")["max_cpus"] is None  # none set
    with pytest.raises(ApiError, match="^reading another user's limits needs an admin token$"):
        call(server, tokens["alice"], "GET", "/v1/limits/bob")


def test_put_of_an_old_clients_body_keeps_the_caps_it_does_not_name(api):
    server, core, tokens = api
    admin = tokens["admin"]
    call(server, admin, "PATCH", "/v1/limits/alice",
         {"max_cpus": 8, "max_mem_mib": 4096, "max_running": 5})  # fmt: skip
    # what `dlc groups limit alice --max-running 2 --max-gpus 4` sent before max_cpus existed
    old_shape = {"max_running": 2, "max_gpus": 4, "max_interactive_s": None,
                 "max_interactive": None}  # fmt: skip
    out = call(server, admin, "PUT", "/v1/limits/alice", old_shape)
    assert core.tenancy.limits["alice"] == UserLimits("alice", 2, 4, max_cpus=8, max_mem_mib=4096)
    assert (out["max_cpus"], out["max_mem_mib"], out["max_running"]) == (8, 4096, 2)
    # an explicit null still removes that cap; a cap left out stays
    out = call(server, admin, "PUT", "/v1/limits/alice", {"max_cpus": None})
    assert core.tenancy.limits["alice"] == UserLimits("alice", 2, 4, max_mem_mib=4096)
    (entry,) = call(server, admin, "GET", "/v1/quota/audit?limit=1")["audit"]
    assert entry["detail"]["changed"] == ["max_cpus"]
    # an empty body changes nothing and writes no audit line
    assert call(server, admin, "PUT", "/v1/limits/alice", {}) == out
    assert len(call(server, admin, "GET", "/v1/quota/audit")["audit"]) == 3


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_a_limit_on_a_name_the_cluster_never_saw_is_stored_with_a_one_line_warning(api, method):
    server, core, tokens = api
    out = call(server, tokens["admin"], method, "/v1/limits/alcie", {"max_cpus": 8})
    assert out["warning"] == (
        "user 'alcie': no token, group member or job has that name (did you mean alice?); the "
        "limits are stored and apply once a user of that name submits; `dlc groups limit "
        "alcie --clear` removes them"
    )
    assert core.tenancy.limits["alcie"] == UserLimits("alcie", max_cpus=8)  # stored all the same
    out = call(server, tokens["admin"], method, "/v1/limits/zed", {"max_gpus": 1})
    assert out["warning"].startswith("user 'zed': no token, group member or job has that name; ")


def test_no_warning_for_a_user_with_a_token_a_group_or_a_job_or_for_a_limit_removed(api):
    server, core, tokens = api
    admin = tokens["admin"]
    call(server, admin, "POST", "/v1/groups", {"name": "team-a", "default_pool": "train"})
    call(server, admin, "POST", "/v1/groups/team-a/members", {"user": "carol"})
    core.store.add_job(Job(core.store.new_job_id(), "dave", JobSpec.from_dict({"image": "b"})))
    for user in ("alice", "root", "carol", "dave"):
        out = call(server, admin, "PATCH", f"/v1/limits/{user}", {"max_cpus": 8})
        assert "warning" not in out, user
    assert "did you mean alice?" in call(server, admin, "PATCH", "/v1/limits/alcie",
                                         {"max_cpus": 8})["warning"]  # fmt: skip
    out = call(server, admin, "PATCH", "/v1/limits/alcie", {"max_cpus": None})
    assert "warning" not in out and "alcie" not in core.tenancy.limits  # holds nothing now


def test_a_member_the_cluster_never_saw_is_added_with_a_one_line_warning(api):
    server, core, tokens = api
    admin = tokens["admin"]
    call(server, admin, "POST", "/v1/groups", {"name": "team-a", "default_pool": "train"})
    out = call(server, admin, "POST", "/v1/groups/team-a/members", {"user": "alcie"})
    assert out["warning"] == (
        "user 'alcie': no token, group member or job has that name (did you mean alice?); "
        "added to team-a all the same; `dlc groups remove team-a alcie` takes the name out"
    )
    assert out["groups"][0]["members"] == ["alcie"]  # added all the same
    assert core.tenancy.group_of("alcie") == "team-a"
    # known names: a token's user, and now alcie, a group member
    for user in ("alice", "root", "alcie"):
        out = call(server, admin, "POST", "/v1/groups/team-a/members", {"user": user})
        assert "warning" not in out, user
    out = call(server, admin, "POST", "/v1/groups/team-a/members", {"user": "zed"})
    assert out["warning"].startswith("user 'zed': no token, group member or job has that name; ")


def test_delete_removes_all_of_a_users_limits(api):
    server, core, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_running": 2, "max_cpus": 4})
    out = call(server, tokens["admin"], "DELETE", "/v1/limits/alice")
    assert out["removed"] is True and out["max_running"] is None and out["max_cpus"] is None
    assert "alice" not in core.tenancy.limits
    assert call(server, tokens["admin"], "GET", "/v1/quota")["limits"] == []
    assert call(server, tokens["admin"], "DELETE", "/v1/limits/alice")["removed"] is False
    audit = call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"]
    assert [e["action"] for e in audit] == ["limits-removed", "limits"]


@pytest.mark.parametrize("method, body", [("PATCH", {"max_cpus": 1e6}), ("DELETE", None)])
def test_a_user_may_not_change_or_remove_their_limits(api, method, body):
    server, core, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_cpus": 4})
    with pytest.raises(ApiError, match="^changing groups, quotas or limits needs an admin token$"):
        call(server, tokens["alice"], method, "/v1/limits/alice", body)
    assert core.tenancy.limits["alice"].max_cpus == 4


@pytest.mark.parametrize(
    "body, match",
    [
        ({"max_cpus": -1}, "max_cpus: -1 is negative; give 0 or more"),
        ({"max_gpus": float("nan")}, "max_gpus: nan is out of range"),
        ({"max_running": 1.5}, "max_running"),
        ({"max_cpus": "8"}, "max_cpus"),
        ({"max_cpu": 8}, "max_cpu"),
    ],
)
def test_a_bad_patch_is_one_line_naming_the_field_and_nothing_changes(api, body, match):
    server, core, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_gpus": 2})
    with pytest.raises(ApiError, match=match) as err:
        call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_running": 1, **body})
    assert "\n" not in str(err.value)
    assert core.tenancy.limits["alice"] == UserLimits("alice", max_gpus=2)
    assert len(call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"]) == 1


def test_limits_are_listed_to_an_admin_and_each_user_sees_only_their_own(api):
    server, _, tokens = api
    call(server, tokens["admin"], "PUT", "/v1/limits/alice", {"max_cpus": 16, "max_running": 0})
    call(server, tokens["admin"], "PUT", "/v1/limits/bob", {"max_gpus": 2})
    everyone = call(server, tokens["admin"], "GET", "/v1/quota")["limits"]
    assert [row["user"] for row in everyone] == ["alice", "bob"]
    mine = call(server, tokens["alice"], "GET", "/v1/quota")["limits"]
    held = {"running": 0, "gpus": 0, "cpus": 0, "environments": 0, "mem_mib": 0}  # none yet
    assert mine == [{"user": "alice", "max_running": 0, "max_gpus": None, "max_cpus": 16,
                     "max_mem_mib": None, "max_interactive_s": None, "max_interactive": None,
                     "held": held}]  # fmt: skip
    assert call(server, tokens["alice"], "GET", "/v1/tenancy")["quota"]["limits"] == mine


def test_each_limits_row_says_what_the_user_holds_now(api):
    server, core, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_cpus": 32, "max_gpus": 8})
    alice = ApiClient(server.url, tokens["alice"])
    alice.submit({"image": "busybox", "gpus": 2, "cpus": 6, "nodes": 2, "pool": "train"})
    alice.submit({"image": "busybox", "gpus": 0, "cpus": 4, "pool": "train"})
    train = {"dlc_pool": "train"}
    core.on_offers([offer(f"o{i}", agent, list(range(8)), cpus=64, mem=262144, attrs=train)
                    for i, agent in enumerate(("a1", "a2"))])  # fmt: skip
    (row,) = call(server, tokens["alice"], "GET", "/v1/quota")["limits"]
    # held on the agents: the asks (memory 1024 MiB a node by default, 3 nodes) and each
    # task's executor (0.1 CPU, 64 MiB: red-team finding 57)
    assert row["held"] == {"running": 2, "gpus": 4, "cpus": 16.3, "environments": 0,
                           "mem_mib": 3264}  # fmt: skip
    assert row["max_cpus"] == 32 and row["max_gpus"] == 8


def test_the_memory_limit_is_set_by_patch_answered_and_refuses_a_submit_past_it(api):
    """Red-team finding 56: memory is capped per user as CPUs are."""
    server, core, tokens = api
    out = call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_mem_mib": 8192})
    assert out["max_mem_mib"] == 8192 and core.tenancy.limits["alice"].max_mem_mib == 8192
    assert call(server, tokens["alice"], "GET", "/v1/limits/alice")["max_mem_mib"] == 8192
    alice = ApiClient(server.url, tokens["alice"])
    with pytest.raises(
        ApiError,
        match=r"^mem_mib: the job needs 12.125G of memory over all its "
        r"nodes \(12G asked and 64M a node for its executor\)",
    ):
        alice.submit({"image": "busybox", "gpus": 0, "cpus": 0.01, "mem_mib": 6144, "nodes": 2,
                      "pool": "train"})  # fmt: skip
    with pytest.raises(ApiError, match="changing groups, quotas or limits needs an admin token"):
        call(server, tokens["alice"], "PATCH", "/v1/limits/alice", {"max_mem_mib": None})
    with pytest.raises(ApiError, match="max_mem_mib: nan is out of range"):
        call(server, tokens["admin"], "PATCH", "/v1/limits/alice", {"max_mem_mib": float("nan")})
    assert core.tenancy.limits["alice"].max_mem_mib == 8192


def test_a_user_may_not_raise_their_own_cpu_limit(api):
    server, core, tokens = api
    call(server, tokens["admin"], "PUT", "/v1/limits/alice", {"max_cpus": 4})
    with pytest.raises(ApiError, match="changing groups, quotas or limits needs an admin token"):
        call(server, tokens["alice"], "PUT", "/v1/limits/alice", {"max_cpus": 1e6})
    assert core.tenancy.limits["alice"].max_cpus == 4


def test_a_submit_past_the_cpu_limit_is_refused_and_a_cpu_only_job_queues_as_cpu_only(api):
    server, core, tokens = api
    call(server, tokens["admin"], "PUT", "/v1/limits/alice", {"max_cpus": 8})
    alice = ApiClient(server.url, tokens["alice"])
    with pytest.raises(
        ApiError,
        match=r"^cpus: the job needs 12.2 CPUs over all its nodes "
        r"\(12 asked and 0.1 a node for its executor\) but user",
    ):
        alice.submit({"image": "busybox", "gpus": 0, "cpus": 6, "nodes": 2, "pool": "train"})
    first = alice.submit({"image": "busybox", "gpus": 0, "cpus": 6, "pool": "train"})
    core.on_offers([offer("o1", "a1", list(range(8)), cpus=64, mem=262144,
                          attrs={"dlc_pool": "train"})])  # fmt: skip
    second = alice.submit({"image": "busybox", "gpus": 0, "cpus": 4, "pool": "train"})
    (row,) = call(server, tokens["alice"], "GET", "/v1/queue")["queue"]
    assert row["id"] == second["id"] and first["id"] != second["id"]
    assert (row["gpus"], row["cpus"], row["cpu_only"], row["nodes"]) == (0, 4, True, 1)
    assert row["reason"] == (
        "user alice holds 6.1 of 8 CPUs allowed; this job needs 4.1 (each task's executor included)"
    )


def test_grace_is_set_by_an_admin_and_audited(api):
    server, core, tokens = api
    out = call(server, tokens["admin"], "PUT", "/v1/preemption-grace", {"grace_s": 45})
    assert out == {"grace_s": 45.0} and core.tenancy.grace_s == 45.0
    audit = call(server, tokens["admin"], "GET", "/v1/quota/audit")["audit"]
    assert audit[0]["action"] == "grace" and audit[0]["detail"] == {"grace_s": 45.0}


def test_bad_grace_is_one_line_naming_the_field(api):
    server, core, tokens = api
    with pytest.raises(ApiError, match="grace: 7200 s is out of range; give 0 to 3600"):
        call(server, tokens["admin"], "PUT", "/v1/preemption-grace", {"grace_s": 7200})
    with pytest.raises(ApiError, match="needs an admin token"):
        call(server, tokens["alice"], "PUT", "/v1/preemption-grace", {"grace_s": 5})
    assert core.tenancy.grace_s == 30.0


def test_nodes_show_each_shared_gpu_with_its_backend_and_tenants(api):
    from click.testing import CliRunner

    from dlc.cli.main import cli
    from tests.scheduler.placement.test_share_placement import ranged_offer

    server, core, tokens = api
    alice = ApiClient(server.url, tokens["alice"])
    root = ApiClient(server.url, tokens["admin"])
    core.on_offers([ranged_offer("o1", "s1", sharing="shim")])  # the agent is known
    for client in (alice, root):
        client.submit({"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpu_memory": "4G"})
    core.on_offers([ranged_offer("o2", "s1", sharing="shim")])
    nodes = call(server, tokens["alice"], "GET", "/v1/nodes")["nodes"]
    (node,) = [n for n in nodes if n["agent_id"] == "s1"]
    assert node["sharing"] == "shim"
    # a fault-isolated backend: two users' shares pack onto one GPU
    assert [s["tenants"] for s in node["shared_gpus"]] == [["alice", "root"]]
    env = {"DLC_API": server.url, "DLC_TOKEN": tokens["alice"]}
    out = CliRunner().invoke(cli, ["nodes"], env=env).output
    assert "BACKEND" in out and "alice,root" in out and "shim" in out


def _with_fair_usage(server, core, tokens) -> None:
    """The quotas configured and team-a's usage recorded: alice 12 GPU-hours, carol 3."""
    import time

    from dlc.scheduler.tenancy.fair_share import UsageRow

    configure(server, tokens["admin"])
    now = time.time()
    core.store.save_fair_usage([UsageRow("team-a", "alice", 12.0, now),
                                UsageRow("team-a", "carol", 3.0, now)], now)  # fmt: skip
    core.reload()


def test_fair_share_and_audit_json_keep_their_shape(api):
    # the core hands typed reports (FairShare, AuditEntry); the API's JSON is as it was
    server, core, tokens = api
    _with_fair_usage(server, core, tokens)
    fair = call(server, tokens["admin"], "GET", "/v1/quota")["fair_share"]
    assert list(fair) == ["half_life_s", "groups", "billing"] and fair["half_life_s"] == 7 * 86400
    # what a CPU and a MiB bill as: the agents' 192 CPUs and 768 GiB over their 20 GPUs
    assert fair["billing"] == {"unit": "GPU", "cpus_default": False,
                               "cpus_per_gpu": pytest.approx(9.6),
                               "mem_mib_per_gpu": pytest.approx(786432 / 20)}  # fmt: skip
    (group,) = fair["groups"]
    assert list(group) == ["group", "gpu_hours", "weight", "ratio", "users"]
    assert (group["group"], round(group["gpu_hours"], 3), group["weight"]) == ("team-a", 15, 6)
    assert [(u["user"], round(u["gpu_hours"], 3)) for u in group["users"]] == [
        ("alice", 12.0),
        ("carol", 3.0),
    ]
    entry = call(server, tokens["admin"], "GET", "/v1/quota/audit?limit=1")["audit"][0]
    assert list(entry) == ["at", "actor", "action", "detail"] and isinstance(entry["at"], float)
    assert (entry["actor"], entry["action"]) == ("root", "quota")
    assert entry["detail"]["group"] == "team-b"


def test_a_user_sees_only_their_own_row_of_the_fair_share_and_no_audit(api):
    # red-team session 10 (checked, held): the typed reports did not widen what a user sees
    server, core, tokens = api
    _with_fair_usage(server, core, tokens)
    for path in ("/v1/quota", "/v1/tenancy"):
        body = call(server, tokens["alice"], "GET", path)
        fair = (body if path == "/v1/quota" else body["quota"])["fair_share"]
        (group,) = fair["groups"]
        assert round(group["gpu_hours"], 3) == 15  # the group's total, as documented
        assert [u["user"] for u in group["users"]] == ["alice"]
        assert "carol" not in str(body)
    with pytest.raises(ApiError) as refused:  # a read, so no "changing ..." (one line)
        call(server, tokens["alice"], "GET", "/v1/quota/audit")
    assert str(refused.value) == AUDIT_REFUSAL and "changing" not in AUDIT_REFUSAL


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/v1/limits/b%6Fb", 403),  # percent-encoded: still bob, not alice
        ("GET", "/v1/limits/%E2%80%8Balice", 403),  # a zero-width space: not alice
        ("GET", "/v1/limits/ALICE", 403),  # no case folding
        ("GET", "/v1/limits/alice%2F..%2Fbob", 404),  # an encoded slash matches no route
        ("GET", "/v1/dashboard/../limits/bob", 404),  # the dashboard's route forwards GET only
        ("DELETE", "/v1/dashboard/../limits/bob", 404),
        ("PATCH", "/v1/limits/b%6Fb", 403),
        ("POST", "/v1/limits/bob", 405),
    ],
)
def test_path_tricks_read_or_change_no_other_users_limits(api, method, path, status):
    """Red-team pass, session 12 (held): a user's token reaches only their own limits,
    however the name is spelt in the path."""
    import http.client
    from urllib.parse import urlsplit

    server, core, tokens = api
    call(server, tokens["admin"], "PATCH", "/v1/limits/bob", {"max_cpus": 4})
    url = urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    body = b'{"max_cpus": 1000}' if method in ("PATCH", "POST") else None
    headers = {"Authorization": f"Bearer {tokens['alice']}", "Content-Type": "application/json"}
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    assert answer.status == status
    assert b"max_cpus" not in answer.read()  # bob's limits are not in any answer
    assert core.tenancy.limits["bob"] == UserLimits("bob", max_cpus=4)


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_a_user_never_gets_the_unknown_name_warning_or_the_names_it_suggests(api, method):
    """Session 14 red-team (held): the did-you-mean warning lists known user names; a user's
    token changing limits, on a name close to another user's, gets the one-line 403 and no
    name; a malformed body gets a 400 naming only its field; nothing is stored."""
    server, core, tokens = api
    core.store.add_token("bobby")
    body = None if method == "DELETE" else {"max_cpus": 8}
    for user in ("bobbi", "alcie", "ALICE"):
        with pytest.raises(ApiError) as err:
            call(server, tokens["alice"], method, f"/v1/limits/{user}", body)
        assert str(err.value) == "changing groups, quotas or limits needs an admin token"
    if body is not None:
        for bad in ({"max_cpus": "8"}, {"user": "bob"}, {"max_gpus": True}):
            with pytest.raises(ApiError) as err:
                call(server, tokens["alice"], method, "/v1/limits/bobbi", bad)
            assert "bobby" not in str(err.value) and "did you mean" not in str(err.value)
    assert core.tenancy.limits == {}
    # the admin is told, with the name closest to it
    if body is not None:
        warning = call(server, tokens["admin"], method, "/v1/limits/bobbi", body)["warning"]
        assert "(did you mean bobby?)" in warning
