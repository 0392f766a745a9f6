"""Red-team #8: one user queued 2,000 8-GPU jobs and killing them took 80 s, one by one.

Now queued jobs are capped per user (admins exempt) with a one-line 429 naming the limit,
and ``dlc kill --all`` / ``POST /v1/jobs/kill`` kill a user's live jobs at once, never
another user's (unless the caller is an admin). Real API server, real SQLite store.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.errors import ApiError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer

JOB = {"image": "busybox:1", "command": "sleep 1"}


@pytest.fixture
def api(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=3)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, "12.1"))
    kills = []
    server = ApiServer(core, LogReader(lambda: None), kills.append)
    server.start()
    tokens = {u: core.store.add_token(u) for u in ("alice", "bob")}
    tokens["root"] = core.store.add_token("root", admin=True)
    clients = {u: ApiClient(server.url, t) for u, t in tokens.items()}
    yield core, clients, tokens, server, kills
    server.stop()
    core.store.close()


def _status(client, path, body) -> int:
    request = urllib.request.Request(client.url + path, json.dumps(body).encode(), method="POST")
    request.add_header("Authorization", f"Bearer {client.token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _states(core, user):
    return sorted(j.state.value for j in core.all_jobs() if j.user == user)


def test_queued_jobs_are_capped_per_user_with_a_one_line_429(api):
    core, clients, *_ = api
    for _ in range(3):
        clients["alice"].submit(JOB)
    with pytest.raises(ApiError) as refused:
        clients["alice"].submit(JOB)
    message = str(refused.value)
    assert "\n" not in message and _status(clients["alice"], "/v1/jobs", JOB) == 429
    assert "alice already has 3 jobs queued" in message and "--max-queued-per-user 3" in message
    clients["bob"].submit(JOB)  # another user is not affected
    for _ in range(4):
        clients["root"].submit(JOB)  # admins are exempt
    clients["alice"].kill(next(j.job_id for j in core.all_jobs() if j.user == "alice"))
    clients["alice"].submit(JOB)  # room again once one left the queue
    assert _states(core, "alice") == ["killed", "queued", "queued", "queued"]


def test_the_cap_counts_only_queued_jobs(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=1)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None))
    first = core.submit("alice", JobSpec.from_dict(JOB))
    core.on_offers([offer("o1", "a1", [0])])  # it starts: no longer queued
    assert core.store.get_job(first.job_id).state is JobState.STAGING
    core.submit("alice", JobSpec.from_dict(JOB))
    core.store.close()


def test_kill_all_kills_only_the_callers_jobs(api):
    core, clients, *_ = api
    for _ in range(3):
        clients["alice"].submit(JOB)
    bobs = [clients["bob"].submit(JOB)["id"] for _ in range(2)]
    result = clients["alice"].kill_all()
    assert result["count"] == 3
    assert _states(core, "alice") == ["killed"] * 3
    assert _states(core, "bob") == ["queued", "queued"]
    assert clients["alice"].kill_all()["count"] == 0  # nothing live is left
    with pytest.raises(ApiError, match="only your own jobs"):
        clients["alice"].kill_all(user="bob")
    with pytest.raises(ApiError, match="only your own jobs"):
        clients["alice"].kill_all(all_users=True)
    assert _status(clients["alice"], "/v1/jobs/kill", {"user": "bob"}) == 403
    assert [core.store.get_job(j).state for j in bobs] == [JobState.QUEUED] * 2


def test_an_admin_kills_one_users_jobs_or_everyones(api):
    core, clients, *_ = api
    clients["alice"].submit(JOB)
    clients["bob"].submit(JOB)
    clients["root"].submit(JOB)
    assert clients["root"].kill_all(user="bob")["count"] == 1
    assert _states(core, "alice") == ["queued"] and _states(core, "bob") == ["killed"]
    assert clients["root"].kill_all(all_users=True)["count"] == 2
    assert _states(core, "alice") == ["killed"] and _states(core, "root") == ["killed"]


def test_kill_all_by_state_sends_task_kills_for_running_jobs(api):
    core, clients, _, _, kills = api
    running = clients["alice"].submit(JOB)["id"]
    core.on_offers([offer("o1", "a1", [0])])
    queued = clients["alice"].submit(JOB)["id"]
    assert clients["alice"].kill_all(states=["queued"]) == {"count": 1, "ids": [queued]}
    assert core.store.get_job(running).state is JobState.STAGING  # left alone
    assert clients["alice"].kill_all(states=["staging"])["ids"] == [running]
    assert kills[-1].kills == [(f"{running}.0.0", "a1")]
    with pytest.raises(ApiError, match="'finished' is not a live state"):
        clients["alice"].kill_all(states=["finished"])


def test_dlc_kill_all_from_the_command_line(api):
    core, _, tokens, server, _ = api
    ApiClient(server.url, tokens["alice"]).submit(JOB)
    ApiClient(server.url, tokens["bob"]).submit(JOB)
    env = {"DLC_API": server.url, "DLC_TOKEN": tokens["alice"], "DLC_CONFIG": "/nonexistent"}
    runner = CliRunner()
    done = runner.invoke(cli, ["kill", "--all", "--state", "queued"], env=env)
    assert done.exit_code == 0 and done.output.strip() == "killed 1 job"
    assert _states(core, "bob") == ["queued"]
    both = runner.invoke(cli, ["kill", "j1", "--all"], env=env)
    assert both.exit_code == 2 and "give one job id, or --all" in both.output
