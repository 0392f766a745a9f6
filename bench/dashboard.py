"""Dashboard at scale: page weight and render time in headless chromium.

Builds the simulated fleet of the browser test (tests/web/fleet.py: 100 agents from the
topology fixtures, every fourth a 16-GPU DGX-2, whole jobs, shares, a 2x8 job, 50 queued),
behind the real API server, then measures in Debian's chromium:

* page weight: bytes transferred for the first signed-in load (page, CSS, scripts, the
  snapshot JSON and the other API calls; Resource Timing ``transferSize``), and the snapshot
  that each 2 s poll fetches again;
* render time: navigation start to the first drawn cluster view, the time one poll's
  redraw takes (median), a search keystroke's redraw, 25 versus 100 rows per page;
* the server's time to build one snapshot (Python, median).

    .venv/bin/python bench/dashboard.py [--agents 100] [--queue 50] [--polls 5]
        [--json bench/results/dashboard.json]

Needs /usr/bin/chromium and chromedriver (``bash scripts/browser.sh``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.web.browser import console_errors, start_chromium  # noqa: E402
from tests.web.fleet import build_fleet  # noqa: E402

RESOURCES = """
const out = {};
for (const e of performance.getEntriesByType('navigation').concat(
    performance.getEntriesByType('resource'))) {
  const name = new URL(e.name).pathname;
  out[name] = (out[name] || 0) + e.transferSize;
}
return out;
"""
REDRAW = """
const t = performance.now();
renderCluster(state.snapshot);
return performance.now() - t;
"""
SEARCH = """
const box = document.getElementById('agent-search');
const t = performance.now();
box.value = arguments[0];
box.dispatchEvent(new Event('input'));
const ms = performance.now() - t;
box.value = '';
box.dispatchEvent(new Event('input'));
return ms;
"""


def wait(driver, script: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for: {script}")


def measure(url: str, token: str, polls: int, work: Path) -> dict:
    driver = start_chromium(work / "profile", 1440, 1000)
    try:
        driver.get(url)
        wait(driver, "return !document.getElementById('login-view').hidden")
        driver.find_element("css selector", "#token-input").send_keys(token)
        driver.find_element("css selector", "#login-form button[type=submit]").click()
        wait(driver, "return document.querySelectorAll('#agents tr.agent-row').length")
        driver.get(url)  # signed in by the cookie: a clean load, timed from navigation start
        first = wait(driver, "return window.dlcTimings && window.dlcTimings.firstDrawnAt")
        time.sleep(0.5)  # let tenancy.js's first call land too
        weights = driver.execute_script(RESOURCES)
        renders = [driver.execute_script(REDRAW) for _ in range(polls)]
        polled = []
        seen = driver.execute_script("return window.dlcTimings.renders")
        while len(polled) < polls:  # full redraws of live polls (cards, tables, cluster, plots)
            now = driver.execute_script("return window.dlcTimings.renders")
            if now > seen:
                polled.append(driver.execute_script("return window.dlcTimings.lastRenderMs"))
                seen = now
            time.sleep(0.2)
        search = [driver.execute_script(SEARCH, "gpu-node-04") for _ in range(polls)]
        driver.execute_script(
            "const s = document.getElementById('page-size'); s.value = '100';"
            "s.dispatchEvent(new Event('change'));"
        )
        wide = [driver.execute_script(REDRAW) for _ in range(polls)]
        rows = driver.execute_script(
            "return document.querySelectorAll('#agents tr.agent-row').length"
        )
        errors = console_errors(driver)
    finally:
        driver.quit()
    static = sum(v for k, v in weights.items() if not k.startswith("/v1/"))
    return {
        "first_load_bytes": sum(weights.values()),
        "static_bytes": static,
        "snapshot_bytes": weights.get("/v1/dashboard", 0),
        "by_path": weights,
        "first_drawn_ms": round(first, 1),
        "cluster_redraw_ms_25_rows": round(statistics.median(renders), 2),
        "cluster_redraw_ms_100_rows": round(statistics.median(wide), 2),
        "poll_redraw_ms": round(statistics.median(polled), 2),
        "search_redraw_ms": round(statistics.median(search), 2),
        "rows_at_100_per_page": rows,
        "console_errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--queue", type=int, default=50)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "dashboard.json"))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="dlc-bench-dash-"))
    fleet = build_fleet(work, args.agents, args.queue)
    try:
        builds = []
        for _ in range(args.polls):
            started = time.perf_counter()
            snap = fleet.dashboard.snapshot("admin", True)
            builds.append((time.perf_counter() - started) * 1000)
        result = measure(fleet.url + "/", fleet.admin_token, args.polls, work)
    finally:
        fleet.stop()
    result["snapshot_build_ms"] = round(statistics.median(builds), 1)
    result["fleet"] = {
        "agents": len(snap["agents"]),
        "gpus": snap["gpus"]["total"],
        "allocated": snap["gpus"]["allocated"],
        "shared_gpus": sum(a["shared"] for a in snap["agents"]),
        "jobs_running": snap["counts"]["running"],
        "jobs_queued": snap["counts"]["queued"],
    }
    result["meta"] = {"python": platform.python_version(), "machine": platform.machine(),
                      "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}  # fmt: skip
    table = Table(title=f"Dashboard at {result['fleet']['agents']} agents "
                        f"({result['fleet']['gpus']} GPUs, {args.queue} queued)")  # fmt: skip
    table.add_column("measure")
    table.add_column("value", justify="right")
    kib = lambda n: f"{n / 1024:.1f} KiB"  # noqa: E731
    for label, value in [
        ("first load, bytes transferred", kib(result["first_load_bytes"])),
        ("  of which page, CSS, scripts", kib(result["static_bytes"])),
        ("  of which one snapshot (fetched every 2 s)", kib(result["snapshot_bytes"])),
        ("snapshot built on the server (median)", f"{result['snapshot_build_ms']} ms"),
        ("navigation start to first drawn cluster", f"{result['first_drawn_ms']} ms"),
        ("one poll's full redraw (median)", f"{result['poll_redraw_ms']} ms"),
        ("cluster redraw, 25 rows (median)", f"{result['cluster_redraw_ms_25_rows']} ms"),
        ("cluster redraw, 100 rows (median)", f"{result['cluster_redraw_ms_100_rows']} ms"),
        ("search keystroke redraw (median)", f"{result['search_redraw_ms']} ms"),
        ("console errors", str(len(result["console_errors"]))),
    ]:
        table.add_row(label, value)
    Console().print(table)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 1 if result["console_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
