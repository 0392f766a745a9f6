"""The dashboard header says which instance leads (docs/ha.md), in headless chromium.

The API server runs with a stub role (what ``DlcService.role`` returns under ``--zk``), so
the page meets a leader and a standby without starting ZooKeeper.
"""

from __future__ import annotations

import pytest

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.web.dashboard import Dashboard
from tests.web.browser import start_chromium
from tests.web.conftest import clock, monitored  # noqa: F401 - fixtures
from tests.web.test_dashboard_browser import wait_for

pytestmark = pytest.mark.browser

STANDBY = {"leading": False, "leader_url": "http://10.0.0.7:8080", "leader": "vm-a",
           "instance": "vm-b", "epoch": None}  # fmt: skip
LEADER = {"leading": True, "leader_url": "http://10.0.0.7:8080", "leader": "vm-a",
          "instance": "vm-a", "epoch": 3}  # fmt: skip
SHOWN = "const e = document.getElementById('ha-role'); return !e.hidden && e.textContent"
SHOWN_LEADER = (
    "const e = document.getElementById('ha-role');"
    "return e.textContent.startsWith('leader') && e.textContent"
)


@pytest.fixture
def page(monitored, clock, tmp_path):  # noqa: F811 - pytest fixtures
    core, metrics = monitored
    role = dict(STANDBY)
    dash = Dashboard(core, metrics, lambda: {"version": "x"}, clock=clock)
    api = ApiServer(core, LogReader(lambda: None), lambda actions: None, web=dash)
    api.leadership = lambda: role
    api.start()
    driver = start_chromium(tmp_path / "profile", 1200, 800)
    try:
        yield driver, api.url, role
    finally:
        driver.quit()
        api.stop()


def test_header_shows_standby_with_leader_link_then_leader(page):
    driver, url, role = page
    driver.get(url + "/")
    text = wait_for(driver, SHOWN)
    assert text == "standby (vm-b) \u00b7 leader: http://10.0.0.7:8080"
    href = driver.execute_script("return document.querySelector('#ha-role a').href")
    assert href.rstrip("/") == "http://10.0.0.7:8080"

    role.update(LEADER)  # this instance wins the election; the next refresh says so
    driver.refresh()
    text = wait_for(driver, SHOWN_LEADER)
    assert text == "leader (vm-a)"
    assert not driver.execute_script("return document.querySelector('#ha-role a')")


def test_single_instance_shows_no_role(monitored, clock, tmp_path):  # noqa: F811
    core, metrics = monitored
    dash = Dashboard(core, metrics, lambda: {"version": "x"}, clock=clock)
    api = ApiServer(core, LogReader(lambda: None), lambda actions: None, web=dash)
    api.leadership = lambda: {"leading": True, "leader_url": api.url, "instance": "single"}
    api.start()
    driver = start_chromium(tmp_path / "profile", 1200, 800)
    try:
        driver.get(api.url + "/")
        wait_for(driver, "return !document.getElementById('login-view').hidden")
        assert driver.execute_script("return document.getElementById('ha-role').hidden")
    finally:
        driver.quit()
        api.stop()
