"""The dashboard's groups-and-quotas section in headless chromium against ``dlc local``."""

from __future__ import annotations

import pytest

from dlc.api.client import ApiClient
from tests.web.browser import console_errors
from tests.web.test_dashboard_browser import (  # noqa: F401  (fixtures)
    _create_user_token,
    browser,
    dlc_local,
    sign_in,
    wait_for,
)

pytestmark = pytest.mark.browser


def cells_containing(table: str, text: str) -> str:
    """A script returning the table's rows as ``a|b|c`` lines once they contain ``text``."""
    return (
        f"const t = [...document.querySelectorAll('#{table} tr')]"
        ".map(tr => [...tr.cells].map(c => c.textContent).join('|')).join('\\n');"
        f"return t.includes({text!r}) && t;"
    )


def test_quota_usage_and_queue_reasons_are_shown(dlc_local, browser):  # noqa: F811
    dashboard, api, token, db = dlc_local
    admin = ApiClient(api, token)
    alice_token = _create_user_token(db, "alice")
    admin._call("POST", "/v1/groups", {"name": "team-a"})
    admin._call("POST", "/v1/groups/team-a/members", {"user": "alice"})
    admin._call("PUT", "/v1/quota/team-a", {"pool": "default", "gpus": 2, "cpus": 8})
    admin._call("PUT", "/v1/limits/alice", {"max_cpus": 4})
    alice = ApiClient(api, alice_token)
    running = alice.submit({"image": "busybox", "gpus": 8, "command": "sleep 60"})
    waiting = alice.submit({"image": "busybox", "gpus": 8, "command": "sleep 1"})
    cpu_only = alice.submit({"image": "busybox", "gpus": 0, "cpus": 3.9, "command": "sleep 1"})
    sign_in(browser, dashboard, alice_token)
    quota = wait_for(browser, cells_containing("tenancy-quota", "team-a|default|8 / 2"))
    assert "team-a|default|8 / 2|6" in quota  # 8 used of 2 guaranteed, 6 borrowed
    assert "team-a|default|8 / 2|6|-|8|1 / 8|" in quota  # 8 GPUs wait; CPUs: 1 used of 8
    queue = wait_for(browser, cells_containing("tenancy-queue", cpu_only["id"]))
    assert waiting["id"] in queue and "team-a #1" in queue
    assert running["id"] not in queue
    # a CPU-only job: "CPU only" and its CPUs, not 0 GPUs; held by alice's CPU limit, which
    # counts each task's executor (0.1 CPU) too
    row = next(line for line in queue.splitlines() if f"|{cpu_only['id']}|" in line)
    assert "|CPU only|3.9|" in row, row
    assert row.endswith("of 4 CPUs allowed; this job needs 4 (each task's executor included)"), row
    # fair share over time: team-a's decayed GPU-hours grow while its 8 GPUs run
    grown = (
        "const t = [...document.querySelectorAll('#tenancy-fair tr')]"
        ".map(tr => [...tr.cells].map(c => c.textContent).join('|')).join('\\n');"
        "return t.split('\\n').some(l => l.startsWith('team-a|')"
        " && parseFloat(l.split('|')[1]) > 0) && t;"
    )
    fair = wait_for(browser, grown)
    row = next(line for line in fair.splitlines() if line.startswith("team-a|"))
    group, used, weight, ratio, users = row.split("|")
    assert float(used) > 0 and weight == "2" and users.startswith("alice ")
    assert console_errors(browser) == []


def test_user_limits_show_what_the_user_holds_and_a_user_sees_only_their_own(
    dlc_local,  # noqa: F811
    browser,  # noqa: F811
):
    dashboard, api, token, db = dlc_local
    admin = ApiClient(api, token)
    carol_token = _create_user_token(db, "carol")
    admin._call("PATCH", "/v1/limits/carol", {"max_cpus": 16, "max_running": 3,
                                               "max_mem_mib": 65536})  # fmt: skip
    admin._call("PATCH", "/v1/limits/carol", {"max_interactive_s": 28800})  # the others kept
    admin._call("PATCH", "/v1/limits/dave", {"max_gpus": 2})
    carol = ApiClient(api, carol_token)
    job = carol.submit({"image": "busybox", "gpus": 0, "cpus": 2, "command": "sleep 120"})
    sign_in(browser, dashboard, carol_token)
    limits = wait_for(browser, cells_containing("tenancy-limits", "carol|1 / 3|"), 60)
    assert limits.splitlines() == [
        "user|running jobs|GPUs|CPUs|memory|interactive environments|longest interactive run",
        "carol|1 / 3|0 / -|2.1 / 16|1.063G / 64G|0 / -|8 h",  # with the executor's 0.1, 64M
    ]  # dave's row is not carol's to see
    carol.kill(job["id"])
    assert console_errors(browser) == []
