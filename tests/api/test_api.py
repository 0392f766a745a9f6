"""The HTTP API over real loopback HTTP: auth, user vs admin, OpenAPI, logs."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.errors import ApiError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.sandboxes import FRAMEWORK_ID, agent_sandbox
from tests.scheduler.helpers import offer


def _resolver(spec):
    return spec.image or f"img/{spec.framework}", "12.1"


@pytest.fixture
def api(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")), _resolver)
    dispatched = []
    server = ApiServer(
        core,
        LogReader(lambda: FRAMEWORK_ID, sandbox_roots=[tmp_path / "agents"]),
        dispatched.append,
        framework_url=lambda: "http://master:5050/#/frameworks/fw-1",
    )
    server.start()
    tokens = {"alice": store.add_token("alice"), "bob": store.add_token("bob")}
    tokens["admin"] = store.add_token("root", admin=True)
    yield server, core, tokens, dispatched
    server.stop()


def client(server, token):
    return ApiClient(server.url, token)


def test_openapi_document_is_valid_json_without_token(api):
    server, *_ = api
    with urllib.request.urlopen(server.url + "/openapi.json") as resp:
        doc = json.loads(resp.read())
    assert doc["openapi"].startswith("3.")
    assert {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/kill",
        "/v1/jobs/{job_id}/logs",
    } <= set(doc["paths"])
    for path in doc["paths"].values():
        for op in path.values():
            for resp in op["responses"].values():
                ref = resp.get("$ref", "")
                if ref:
                    assert ref.rsplit("/", 1)[1] in doc["components"]["responses"]


def test_submit_list_show_kill_as_owner(api):
    server, core, tokens, dispatched = api
    alice = client(server, tokens["alice"])
    job = alice.submit({"framework": "pytorch:2.3", "gpus": 2, "command": ["python", "t.py"]})
    assert job["state"] == "queued" and job["user"] == "alice"
    assert job["framework_url"] == "http://master:5050/#/frameworks/fw-1"
    assert job["image"] == "img/pytorch:2.3"
    assert dispatched[-1].revive
    assert [j["id"] for j in alice.jobs()] == [job["id"]]
    shown = alice.show(job["id"])
    assert [h["state"] for h in shown["history"]] == ["queued"]
    killed = alice.kill(job["id"])
    assert killed["state"] == "killed"


def test_user_sees_and_kills_only_own_jobs_admin_sees_all(api):
    server, core, tokens, _ = api
    a = client(server, tokens["alice"]).submit({"image": "x"})
    b = client(server, tokens["bob"]).submit({"image": "y"})
    assert [j["id"] for j in client(server, tokens["bob"]).jobs()] == [b["id"]]
    with pytest.raises(ApiError, match=f"no job {a['id']}"):
        client(server, tokens["bob"]).show(a["id"])
    with pytest.raises(ApiError, match=f"no job {a['id']}"):
        client(server, tokens["bob"]).kill(a["id"])
    admin = client(server, tokens["admin"])
    assert {j["id"] for j in admin.jobs()} == {a["id"], b["id"]}
    assert admin.kill(a["id"])["state"] == "killed"


@pytest.mark.parametrize(
    "token, match",
    [
        pytest.param(None, "missing or unknown API token", id="no-token"),
        pytest.param("forged", "missing or unknown API token", id="bad-token"),
    ],
)
def test_auth_required(api, token, match):
    server, *_ = api
    with pytest.raises(ApiError, match=match):
        ApiClient(server.url, token or "").jobs()


@pytest.mark.parametrize(
    "body, status, match",
    [
        pytest.param({"image": "x", "gpus": -1}, 400, "gpus: must be between", id="negative-gpus"),
        pytest.param({"image": "x", "colour": 1}, 400, "colour: unknown field", id="unknown"),
        pytest.param("not json", 400, "not JSON", id="bad-json"),
    ],
)
def test_bad_submit_is_one_line_400(api, body, status, match):
    server, _, tokens, _ = api
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    req = urllib.request.Request(server.url + "/v1/jobs", data=data, method="POST")
    req.add_header("Authorization", f"Bearer {tokens['alice']}")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == status
    payload = json.loads(err.value.read())
    assert match in payload["error"] and "\n" not in payload["error"]


def test_logs_from_the_agent_sandbox(api, tmp_path):
    server, core, tokens, _ = api
    alice = client(server, tokens["alice"])
    job = alice.submit({"image": "x"})
    assert alice.logs(job["id"])["data"] == ""  # not started yet
    core.on_offers([offer("o1", "a1", [0])])
    sandbox = agent_sandbox(tmp_path / "agents", f"{job['id']}.0.0")
    (sandbox / "stdout").write_text("epoch 1\nepoch 2\n")
    core.on_status(
        {
            "task_id": {"value": f"{job['id']}.0.0"},
            "agent_id": {"value": "a1"},
            "state": "TASK_RUNNING",
        }
    )
    first = alice.logs(job["id"], length=8)
    assert first["data"] == "epoch 1\n" and first["offset"] == 8 and not first["done"]
    rest = alice.logs(job["id"], offset=first["offset"])
    assert rest["data"] == "epoch 2\n"
    with pytest.raises(ApiError, match="stream must be stdout or stderr"):
        alice.logs(job["id"], stream="stdin")


def test_unreachable_api_message():
    with pytest.raises(ApiError) as err:
        ApiClient("http://127.0.0.1:9", "t", timeout_s=2).jobs()
    assert str(err.value).startswith("cannot reach the DLC scheduler at http://127.0.0.1:9")
    assert "`dlc scheduler` or `dlc local`" in str(err.value)


def test_status_page_and_health(api):
    server, *_ = api
    with urllib.request.urlopen(server.url + "/") as resp:
        assert b"DLC scheduler" in resp.read()
    with urllib.request.urlopen(server.url + "/healthz") as resp:
        assert json.loads(resp.read())["ok"] is True


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("127.0.0.1:8642", id="no-scheme"),
        pytest.param("ftp://127.0.0.1:8642", id="ftp"),
        pytest.param("http://", id="no-host"),
        pytest.param("http://127.0.0.1:99999", id="port-out-of-range"),
    ],
)
@pytest.mark.parametrize("via", ["argument", "environment"])
def test_bad_api_url_names_the_option_and_fix(monkeypatch, url, via):
    monkeypatch.setenv("DLC_API", url)
    with pytest.raises(ApiError) as err:
        ApiClient(url if via == "argument" else None, "t").jobs()
    assert str(err.value) == (
        f"--api/DLC_API: {url!r} is not an http(s) URL; use e.g. http://127.0.0.1:8642"
    )


def test_api_server_stops_when_it_never_started(tmp_path):
    store = JobStore(tmp_path / "db")
    server = ApiServer(SchedulerCore(store), LogReader(lambda: None), lambda actions: None, port=0)
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=5)
    store.close()
    assert not stopper.is_alive(), "ApiServer.stop() hung waiting for a serve loop never started"


def test_wire_model_lists_every_jobspec_field():
    # A field added to JobSpec must be added to the wire model too (or submits refuse it).
    from dlc.api.models import JobSpecIn
    from dlc.scheduler.jobs.job import JobSpec

    assert set(JobSpecIn.model_fields) == set(JobSpec.__dataclass_fields__)
