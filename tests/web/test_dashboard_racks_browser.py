"""The dashboard's cluster view groups agents by rack (headless chromium).

Five agents behind the real API server: two in rack r1, two in rack r2 (``dlc node-config
--rack/--switch`` attributes, zone from the offer's fault domain), listed by hostname so that
the racks interleave, and one agent without a rack. A 2-node gang runs in one rack.
"""

from __future__ import annotations

import pytest

from dlc.api.logs import LogReader
from dlc.api.metrics import SchedulerMetrics
from dlc.api.server import ApiServer
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from dlc.web.dashboard import Dashboard
from tests.scheduler.helpers import offer
from tests.web.browser import console_errors, start_chromium
from tests.web.test_dashboard_browser import sign_in, wait_for

pytestmark = pytest.mark.browser

#: hostname -> (rack, switch); "" = no rack
AGENTS = {"n1": ("r2", "r2-tor"), "n2": ("r1", "r1-tor"), "n3": ("r2", "r2-tor"),
          "n4": ("r1", "r1-tor"), "n5": ("", "")}  # fmt: skip

RACKS = """
return [...document.querySelectorAll('#agents tr')].map(r =>
  r.classList.contains('rack-row') ? 'rack:' + r.dataset.rack + ' ' + r.textContent
  : r.dataset.agent || '').filter(Boolean)
"""


def _offer(k: int, host: str) -> dict:
    rack, switch = AGENTS[host]
    attrs = {"dlc_rack": rack, "dlc_switch": switch} if rack else {}
    body = offer(f"o{k}", f"agent-{host}", list(range(4)), attrs=attrs)
    body["hostname"] = host
    body["domain"] = {"fault_domain": {"region": {"name": "eu"}, "zone": {"name": "eu-1a"}}}
    return body


@pytest.fixture
def server(tmp_path):
    store = JobStore(tmp_path / "db")
    metrics = SchedulerMetrics()
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda spec: (spec.image, None), metrics=metrics)  # fmt: skip
    core.submit("alice", JobSpec(image="img", gpus=4, nodes=2, command=("true",)))
    core.on_offers([_offer(k, host) for k, host in enumerate(AGENTS)])
    dash = Dashboard(core, metrics, lambda: {"version": "racks"})
    api = ApiServer(core, LogReader(lambda: "fw"), lambda actions: None, web=dash)
    api.leadership = lambda: {"instance": "single", "leading": True}
    api.start()
    yield api, store.add_token("admin", True)
    api.stop()
    dash.stop()
    store.close()


def test_cluster_view_groups_agents_by_rack(server, tmp_path):
    api, token = server
    driver = start_chromium(tmp_path / "profile", 1280, 900)
    try:
        sign_in(driver, api.url + "/", token)
        wait_for(driver, "return document.querySelectorAll('#agents tr.rack-row').length === 3")
        rows = driver.execute_script(RACKS)
        heads = [r for r in rows if r.startswith("rack:")]
        assert [h.split()[0] for h in heads] == ["rack:r1", "rack:r2", "rack:"]
        order = [r for r in rows if not r.startswith("rack:")]
        assert order == ["agent-n2", "agent-n4", "agent-n1", "agent-n3", "agent-n5"]
        # the gang took one rack whole: one header counts 0 of 8 GPUs free, the other 8
        frees = sorted(h.split(" \u00b7 ")[2] for h in heads[:2])
        assert frees == ["0 of 8 GPUs free", "8 of 8 GPUs free"]
        assert "switch r1-tor" in heads[0] and "zone eu-1a" in heads[0] and "2 agents" in heads[0]
        assert "no rack" in heads[-1]
        assert not console_errors(driver)
    finally:
        driver.quit()
