"""The dashboard's routes over real loopback HTTP: page, static files, metrics, auth."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.scheduler.jobs.job import JobSpec
from dlc.web.dashboard import Dashboard
from tests.scheduler.helpers import offer


@pytest.fixture
def server(monitored, clock):
    core, metrics = monitored
    core.on_offers([offer("o1", "agent-1", gpus=[0, 1])])
    dash = Dashboard(core, metrics, lambda: {"version": "x"}, clock=clock)
    api = ApiServer(core, LogReader(lambda: None), lambda actions: None, web=dash)
    api.start()
    tokens = {"alice": core.store.add_token("alice"), "root": core.store.add_token("r", True)}
    yield api, tokens
    api.stop()


def get(url: str, token: str | None = None, method: str = "GET"):
    """``(status, content type, body bytes)`` of a request, errors included."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()


@pytest.mark.parametrize(
    ("path", "status", "ctype", "contains"),
    [
        pytest.param("/", 200, "text/html", b'src="/static/dashboard.js"', id="page"),
        pytest.param("/static/dashboard.js", 200, "text/javascript", b"/v1/dashboard", id="js"),
        pytest.param("/static/dashboard.css", 200, "text/css", b".agent", id="css"),
        pytest.param("/static/cluster.js", 200, "text/javascript", b"renderCluster", id="cluster"),
        pytest.param("/static/../api.py", 404, "text/plain", b"no such file", id="no-escape"),
        pytest.param("/metrics", 200, "text/plain; version=0.0.4", b"dlc_agent_gpus", id="metrics"),
        pytest.param("/healthz", 200, "application/json", b'"ok":true', id="api-still-there"),
    ],
)
def test_pages_without_token(server, path, status, ctype, contains):
    api, _ = server
    got_status, got_type, body = get(api.url + path)
    assert (got_status, got_type.split(";")[0]) == (status, ctype.split(";")[0])
    assert got_type.startswith(ctype)
    assert contains in body


def test_metrics_parse_with_the_agent_from_the_offer(server):
    api, _ = server
    _, _, body = get(api.url + "/metrics")
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
    }
    labels = (("agent", "agent-1"), ("hostname", "host-agent-1"), ("model", "unknown"))
    assert found[("dlc_agent_gpus", labels)] == 2
    assert found[("dlc_offers_received_total", ())] == 1


@pytest.mark.parametrize(
    ("path", "token", "method", "status", "error"),
    [
        pytest.param(
            "/v1/dashboard", None, "GET", 401, "missing or unknown API token", id="no-token"
        ),
        pytest.param("/v1/dashboard", "wrong", "GET", 401, "missing or unknown", id="bad-token"),
        pytest.param("/v1/dashboard", "alice", "POST", 405, "POST is not allowed", id="post"),
        pytest.param(
            "/v1/dashboard/agents/nope/topology",
            "alice",
            "GET",
            404,
            "no agent nope",
            id="unknown-agent",
        ),  # fmt: skip
        pytest.param("/v1/dashboard/other", "alice", "GET", 404, "no endpoint", id="unknown-path"),
    ],
)
def test_json_routes_refuse(server, path, token, method, status, error):
    api, tokens = server
    got, ctype, body = get(api.url + path, tokens.get(token, token), method)
    assert got == status and ctype == "application/json"
    assert error in json.loads(body)["error"]


def test_snapshot_and_topology_with_token(server):
    api, tokens = server
    status, _, body = get(api.url + "/v1/dashboard", tokens["alice"])
    snap = json.loads(body)
    assert status == 200 and snap["me"] == {"user": "alice", "admin": False}
    assert [a["id"] for a in snap["agents"]] == ["agent-1"]
    status, _, body = get(api.url + "/v1/dashboard/agents/agent-1/topology", tokens["root"])
    # no dlc_topo attribute: the page draws plain GPU boxes instead
    assert status == 200 and json.loads(body) == {"agent_id": "agent-1", "svg": None}


def _sign_in(api, token: str, content_type="application/json", csrf=True):
    """``(status, Set-Cookie header, JSON)`` of the dashboard's sign-in."""
    headers = {"Content-Type": content_type}
    if csrf:
        headers["X-Requested-With"] = "dlc-dashboard"
    req = urllib.request.Request(
        api.url + "/v1/session",
        data=json.dumps({"token": token}).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers["Set-Cookie"], json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Set-Cookie"], json.loads(err.read())


def _with_cookie(api, path: str, cookie: str, method: str = "GET", headers=None):
    req = urllib.request.Request(
        api.url + path, method=method, data=b"{}" if method == "POST" else None,
        headers={"Cookie": cookie, **(headers or {})},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_sign_in_sets_an_http_only_strict_cookie_that_authenticates(server):
    api, tokens = server
    status, set_cookie, body = _sign_in(api, tokens["alice"])
    assert status == 200 and body == {"user": "alice", "admin": False}
    flags = {part.strip().lower() for part in set_cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    cookie = set_cookie.split(";")[0]
    assert _with_cookie(api, "/v1/session", cookie) == (200, {"user": "alice", "admin": False})
    status, snap = _with_cookie(api, "/v1/dashboard", cookie)
    assert status == 200 and snap["me"]["user"] == "alice"


def test_cookie_writes_need_the_dashboard_header(server):
    api, tokens = server
    cookie = _sign_in(api, tokens["alice"])[1].split(";")[0]
    job = api.core.submit("alice", JobSpec(image="x"))
    path = f"/v1/jobs/{job.job_id}/kill"
    status, body = _with_cookie(api, path, cookie, "POST")  # what a cross-site form could send
    assert status == 403 and body["field"] == "X-Requested-With"
    status, body = _with_cookie(api, path, cookie, "POST", {"X-Requested-With": "dlc-dashboard"})
    assert status == 200 and body["state"] == "killed"


def test_wrong_token_does_not_sign_in_and_sign_out_clears(server):
    api, _ = server
    status, set_cookie, body = _sign_in(api, "not-a-token")
    assert status == 401 and set_cookie is None and body["field"] == "token"
    # both hints name the command that makes tokens today
    assert "`dlc tokens create USER`" in body["error"] and "--create-token" not in body["error"]
    page = get(api.url + "/")[2]
    assert b"<code>dlc tokens create USER</code>" in page and b"--create-token" not in page
    assert _with_cookie(api, "/v1/session", "dlc_session=nope") == (
        200,
        {"user": None, "admin": False},
    )
    req = urllib.request.Request(api.url + "/v1/session", method="DELETE")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 204 and 'dlc_session=""' in resp.headers["Set-Cookie"]


@pytest.mark.parametrize(
    ("content_type", "csrf"), [("text/plain", True), ("application/json", False)]
)
def test_cross_site_form_cannot_sign_a_browser_in(server, content_type, csrf):
    """A cross-site page could POST text/plain (no preflight) and sign the victim's browser in
    as the attacker (red-team): sign-in needs JSON and the X-Requested-With header."""
    api, tokens = server
    status, cookie, body = _sign_in(api, tokens["alice"], content_type, csrf)
    assert status == 403 and cookie is None
    assert body["field"] == "X-Requested-With"
