"""The dashboard at 100 agents in headless chromium (issue 16): the compact cluster view,
search, filters, pages, drill-down, shares, allocated-versus-used and the queue in run order.

The fleet (tests/web/fleet.py) runs behind the real API server: 100 agents from the topology
fixtures (every fourth a 16-GPU DGX-2), whole jobs, a 2x8 job, shares, 50 queued jobs. One
browser session drives everything; the screenshot goes to build/test-artifacts/.
Page weight and render time are measured by bench/dashboard.py, not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.web.browser import console_errors, start_chromium
from tests.web.fleet import build_fleet
from tests.web.test_dashboard_browser import sign_in, wait_for

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
ROWS = "return document.querySelectorAll('#agents tr.agent-row').length"
ROW_IDS = "return [...document.querySelectorAll('#agents tr.agent-row')].map(r => r.dataset.agent)"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    fleet = build_fleet(tmp_path_factory.mktemp("fleet"))
    yield fleet
    fleet.stop()


def choose(driver, select_id: str, value: str) -> None:
    driver.execute_script(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
        "s.dispatchEvent(new Event('change'));",
        select_id,
        value,
    )


def click(driver, selector: str) -> None:
    """Click in the page (the table redraws every 2 s, so no element handle is kept)."""
    driver.execute_script("document.querySelector(arguments[0]).click()", selector)


def count_text(driver) -> str:
    return driver.find_element("css selector", "#agent-count").text


def test_hundred_agents_compact_view(fleet, tmp_path):
    driver = start_chromium(tmp_path / "profile", 1440, 1000)
    try:
        sign_in(driver, fleet.url + "/", fleet.admin_token)
        assert wait_for(driver, ROWS, 60) == 25  # page 1 of 4
        assert count_text(driver) == "1\u201325 of 100 agents"
        # one cell per GPU on the page, 16-GPU agents included, NVLink groups outlined
        cells = driver.execute_script(
            "return [...document.querySelectorAll('#agents tr.agent-row')]"
            ".map(r => r.querySelectorAll('.cell').length)"
        )
        assert sorted(set(cells)) == [8, 16]
        bridge = driver.execute_script(  # agent-002: NVLink bridge pairs 0-2, 1-3, 4-5, 6-7
            "return [...document.querySelectorAll('tr[data-agent=\"agent-002\"] .nvg:not(.none)')]"
            ".map(g => [...g.querySelectorAll('.cell')].map(c => c.dataset.gpu).join(','))"
        )
        assert bridge == ["0,2", "1,3", "4,5", "6,7"]
        assert len(driver.find_elements("css selector", "#cluster-legend")) == 1

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "dashboard-100-agents.png"))

        # shares drawn by job inside one cell (on whichever agents placement packed them: all
        # rows on one page); the `none` backend said in words
        choose(driver, "page-size", "100")
        wait_for(driver, f"return {ROWS.removeprefix('return ')} === 100")
        segs = driver.execute_script(
            "return Math.max(...[...document.querySelectorAll('#agents .cell.shared')]"
            ".map(c => c.querySelectorAll('.segs i').length))"
        )
        assert segs >= 2
        choose(driver, "page-size", "25")
        wait_for(driver, f"return {ROWS.removeprefix('return ')} === 25")
        rtx = driver.find_element("css selector", "tr[data-agent='agent-000']").text
        assert "time-slicing without limits" not in rtx
        choose(driver, "f-model", "NVIDIA_GeForce_RTX_4090")
        wait_for(
            driver, "return document.querySelector('#agent-count').textContent.includes('filtered')"
        )
        assert "time-slicing without limits" in driver.find_element("css selector", "#agents").text
        rtx = sum("4090" in a["model"] for a in fleet.agents)
        assert count_text(driver) == f"1\u2013{rtx} of {rtx} agents (filtered from 100)"
        choose(driver, "f-model", "")

        # allocated versus used: bars, idle highlight, "no sample"
        marks = driver.execute_script(
            "const q = s => document.querySelectorAll('#agents ' + s).length;"
            "return [q('.cell .use'), q('.cell.idle'), q('.cell.nosample')]"
        )
        assert all(n > 0 for n in marks), marks

        # pages
        click(driver, "#page-next")
        wait_for(
            driver, "return document.querySelector('#page-info').textContent === 'page 2 of 4'"
        )
        assert driver.execute_script(ROW_IDS)[0] == "agent-025"
        choose(driver, "page-size", "100")
        wait_for(driver, f"return {ROWS.removeprefix('return ')} === 100")
        # the whole fleet on one page, in agent order (page 2's first row is no longer first)
        assert driver.execute_script(ROW_IDS) == [f"agent-{k:03d}" for k in range(100)]

        # search and filters
        search = driver.find_element("css selector", "#agent-search")
        search.send_keys("gpu-node-04")
        wait_for(driver, f"return {ROWS.removeprefix('return ')} === 10")
        assert driver.execute_script(ROW_IDS) == [f"agent-{k:03d}" for k in range(40, 50)]
        search.clear()
        search.send_keys(fleet.two_by_eight)
        wait_for(driver, f"return {ROWS.removeprefix('return ')} === 2")
        search.clear()
        search.send_keys(" ")  # clears the filter again (an input event)
        choose(driver, "f-pool", "research")
        wait_for(
            driver, "return document.querySelector('#agent-count').textContent.includes('of 33 ')"
        )
        choose(driver, "f-pool", "")
        choose(driver, "f-avail", "free")
        free_rows = wait_for(driver, ROW_IDS)
        for agent in free_rows:
            cells = driver.execute_script(
                "return [...document.querySelectorAll(`tr[data-agent='${arguments[0]}'] .cell`)]"
                ".filter(c => !c.querySelector('.segs i')"
                " && !c.classList.contains('draining')).length",
                agent,
            )
            assert cells > 0
        choose(driver, "f-avail", "")
        choose(driver, "f-user", "carol")
        wait_for(
            driver, "return document.querySelector('#agent-count').textContent.includes('filtered')"
        )
        carol = driver.execute_script(ROW_IDS)
        assert carol and all(
            "carol"
            in driver.execute_script(
                "return [...document.querySelectorAll(`tr[data-agent='${arguments[0]}'] .cell`)]"
                ".map(c => c.title).join(' ')",
                a,
            )
            for a in carol
        )
        choose(driver, "f-user", "")

        # the queue in the core's run order with priorities; a 2x8 job says so
        queue_rows = "return document.querySelectorAll('#queue tr[data-job]').length"
        assert driver.execute_script(queue_rows) == 25  # the first 25, then a button
        click(driver, "#queue [data-more]")
        wait_for(driver, queue_rows.replace("length", "length === 50"))
        order = driver.execute_script(
            "return [...document.querySelectorAll('#queue tr[data-job]')]"
            ".map(r => [Number(r.cells[0].textContent), Number(r.cells[3].textContent)])"
        )
        assert len(order) == 50
        assert [p for p, _ in order] == list(range(1, 51))
        assert [pr for _, pr in order] == sorted((pr for _, pr in order), reverse=True)
        two = f"#running tr[data-job='{fleet.two_by_eight}']"
        assert "2x8 GPUs" in driver.execute_script(
            f'return document.querySelector("{two}").innerText'
        )

        # a job's measured use: some idle, some without a sample
        click(driver, "#running [data-more]")  # every running job, not the first 25
        wait_for(driver, "return document.querySelectorAll('#running tr[data-job]').length > 25")
        running = driver.find_element("css selector", "#running").text
        assert "no sample" in running and "idle" in running

        # drill-down: a row's agent page draws its topology with the GPUs coloured
        # (an agent that holds work, wherever placement put it)
        snap = fleet.dashboard.snapshot("admin", True)
        held = next(
            a
            for a in snap["agents"]
            if a["has_topology"] and any(g["holder"] or g["shares"] for g in a["gpus"])
        )
        click(driver, f"tr[data-agent='{held['id']}'] td.host a")
        last_gpu = f"#agent-drawing svg g#node-gpu{held['total'] - 1}"
        wait_for(driver, f"return document.querySelector('{last_gpu}')", 60)
        title = driver.find_element("css selector", "#agent-title").text
        assert title == held["hostname"]
        drawn = "#agent-drawing g.node.gpu.held, #agent-drawing g.node.gpu.shared"
        assert driver.find_elements("css selector", drawn)
        # a job page shows the logs above the topology drawing
        wait_for(driver, "return document.querySelector('#agent-jobs tr[data-job] a')")
        click(driver, "#agent-jobs tr[data-job] a")
        wait_for(driver, "return document.getElementById('logs').textContent.includes('epoch 1')")
        above = driver.execute_script(
            "return document.getElementById('logs').getBoundingClientRect().top <"
            " document.getElementById('job-agents').getBoundingClientRect().top"
        )
        assert above
        errors = console_errors(driver)
        assert errors == [], errors
    finally:
        driver.quit()
