"""The dashboard in a real headless chromium against a running ``dlc local``.

``dlc local`` runs as a subprocess on the simulated DGX-1 (examples/topologies/dgx1-v100.txt)
with the stand-in executor (no Docker). The test follows a job from submit to finished in
the browser, checks its GPUs are coloured in the topology drawing, that another user sees
them only as taken, and that the browser console stays clean. The main page's screenshot is
saved to build/test-artifacts/dashboard.png.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from dlc.api.client import ApiClient
from tests.web.browser import console_errors, start_chromium

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
STAND_IN = f"{sys.executable} {ROOT / 'tests' / 'scheduler' / 'stand_in_executor.py'}"
ARTIFACTS = ROOT / "build" / "test-artifacts"


@pytest.fixture(scope="module")
def dlc_local(tmp_path_factory):
    """``(dashboard URL, API URL, admin token, job DB)`` of a running ``dlc local``."""
    work = tmp_path_factory.mktemp("dlc-local")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "local", "--simulate", str(DGX1), "--api-port", "0",
         "--cpus", "32", "--mem", "262144", "--work-dir", str(work / "state"),
         "--executor-command", STAND_IN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        lines: list[str] = []
        while not any(line.startswith("Dashboard:") for line in lines):
            line = proc.stdout.readline()
            assert line, "dlc local exited early:\n" + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        dashboard = re.search(r"^Dashboard: (\S+)", text, re.M).group(1)
        api = re.search(r"export DLC_API=(\S+)", text).group(1)
        token = re.search(r"export DLC_TOKEN=(\S+)", text).group(1)
        assert dashboard == f"{api}/"  # no token in any printed URL
        assert all(token not in line for line in lines if "://" in line)
        yield dashboard, api, token, work / "state" / "scheduler.db"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def browser(tmp_path):
    driver = start_chromium(tmp_path / "profile", 1440, 1000)
    yield driver
    driver.quit()


def sign_in(driver, url: str, token: str) -> None:
    """Open the dashboard and sign in through its form (the token never enters a URL)."""
    driver.get(url)
    wait_for(driver, "return !document.getElementById('login-view').hidden")
    driver.find_element("css selector", "#token-input").send_keys(token)
    driver.find_element("css selector", "#login-form button[type=submit]").click()


def wait_for(driver, script: str, timeout: float = 30.0, *args):
    """Poll a JavaScript expression until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script, *args)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {script}")


def wait_for_text(driver, element_id: str, needles: tuple[str, ...], timeout: float = 30.0) -> str:
    """Poll the text of element ``element_id`` until it holds every one of ``needles``;
    return it. A page fills its parts from separate requests (a job page sets the job's
    state, then fetches its logs), so a test waits for the very text it checks, not for a
    sign that another part changed; on a timeout the failure shows the text last seen."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = driver.execute_script(f"return document.getElementById('{element_id}').textContent")
        if text and all(n in text for n in needles):
            return text
        time.sleep(0.2)
    raise AssertionError(f"#{element_id} never showed {needles} in {timeout}s; it shows {text!r}")


CELLS_OF_JOB = """
return [...document.querySelectorAll('#agents .cell')]
  .filter(c => c.dataset.job === arguments[0]).map(c => Number(c.dataset.gpu)).sort();
"""

GPUS_OF_JOB = """
return [...document.querySelectorAll(arguments[0] + ' g.node.gpu')]
  .filter(g => g.dataset.job === arguments[1] && g.classList.contains('held'))
  .map(g => Number(g.dataset.gpu)).sort();
"""


def test_dashboard_follows_a_job_to_finished(dlc_local, browser):
    dashboard, api, token, _ = dlc_local
    admin = ApiClient(api, token)
    sign_in(browser, dashboard, token)
    wait_for(browser, "return document.querySelector('#agents .cell[data-gpu=\"7\"]')")
    assert "token" not in browser.current_url
    assert urlsplit(browser.current_url).path == "/"
    # the session is an HttpOnly cookie: the page's script cannot read the token
    assert token not in browser.execute_script(
        "return document.cookie + JSON.stringify(localStorage)"
    )

    job = admin.submit(
        {
            "image": "none",
            "gpus": 2,
            "name": "resnet50",
            "command": ["sh", "-c", "sleep 4; echo trained"],
        }
    )
    job_id = job["id"]
    row = f"#running tr[data-job='{job_id}']"
    wait_for(browser, f'return document.querySelector("{row}")')
    placed = admin.show(job_id)["tasks"][0]["gpu_ids"]
    assert len(placed) == 2
    shown = wait_for(browser, CELLS_OF_JOB, 10, job_id)
    assert shown == sorted(placed)
    fill = browser.execute_script(
        "return getComputedStyle(document.querySelector("
        "'#agents .cell[data-gpu=\"' + arguments[0] + '\"] .segs i')).backgroundColor",
        placed[0],
    )
    assert fill not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
    held_text = browser.find_element("css selector", "#cards").text
    assert "2\n/ 8" in held_text or "2 / 8" in held_text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))

    browser.find_element("css selector", f"{row} a").click()
    wait_for(browser, "return location.hash.startsWith('#/jobs/')")
    assert wait_for(browser, GPUS_OF_JOB, 10, "#job-agents", job_id) == sorted(placed)
    wait_for(browser, "return document.getElementById('job-state').textContent === 'finished'", 40)
    # the page shows the job's state before it fetches the logs of the same refresh: the
    # log check waits for the job's output itself (the logs held only "gpu_ids=..." when
    # it read them as soon as they held anything, on a loaded machine)
    wait_for_text(browser, "job-history", ("queued", "staging", "running", "finished"), 10)
    logs = wait_for_text(browser, "logs", ("trained",), 20)
    given = re.search(r"^gpu_ids=([\d,]+)$", logs, re.M)  # the stand-in's first line
    assert given and sorted(map(int, given.group(1).split(","))) == sorted(placed), logs
    browser.save_screenshot(str(ARTIFACTS / "dashboard-job.png"))

    browser.get(dashboard)  # a reload stays signed in (the cookie)
    wait_for(browser, f"return document.querySelector(\"#done tr[data-job='{job_id}']\")")
    assert browser.execute_script(CELLS_OF_JOB, job_id) == []
    assert console_errors(browser) == []


def test_a_cpu_only_job_shows_as_cpu_only_and_holds_no_gpu(dlc_local, browser):
    dashboard, api, token, _ = dlc_local
    admin = ApiClient(api, token)
    sign_in(browser, dashboard, token)
    wait_for(browser, "return document.querySelector('#agents .cell[data-gpu=\"7\"]')")
    job = admin.submit({"image": "none", "gpus": 0, "name": "prep",
                        "command": ["sh", "-c", "sleep 4; echo prepared"]})  # fmt: skip
    job_id = job["id"]
    row = f"#running tr[data-job='{job_id}']"
    wait_for(browser, f'return document.querySelector("{row}")')
    cell = browser.find_element("css selector", f"{row} td.gpus").text
    assert cell.startswith("CPU only") and "GPU" not in cell.replace("CPU only", ""), cell
    assert browser.execute_script(CELLS_OF_JOB, job_id) == []  # no GPU drawn as its
    assert admin.show(job_id)["tasks"][0]["gpu_ids"] == []
    # its page says what it asks, not "0 GPUs"
    browser.execute_script(f"location.hash = '#/jobs/{job_id}';")
    facts = wait_for(browser, "const t = document.getElementById('job-facts').textContent; "
                     "return t.includes('Attempt') && t")  # fmt: skip
    assert "GPUsCPU only: 1 CPU per node, no GPU" in facts.replace("\n", ""), facts
    assert "Placed on127.0.0.1 CPU only (" in facts.replace("\n", ""), facts
    assert console_errors(browser) == []


def test_other_users_gpus_show_as_taken(dlc_local, browser):
    _, api, token, db = dlc_local
    admin = ApiClient(api, token)
    job = admin.submit({"image": "none", "gpus": 1, "command": ["sleep", "20"]})
    gpu = agent = None
    deadline = time.monotonic() + 20
    while gpu is None and time.monotonic() < deadline:
        tasks = admin.show(job["id"])["tasks"]
        gpu, agent = (tasks[0]["gpu_ids"][0], tasks[0]["agent_id"]) if tasks else (None, None)
        time.sleep(0.2)
    assert gpu is not None, "the job was not placed"
    bob = _create_user_token(db, "bob")
    sign_in(browser, f"{api}/", bob)
    cell = f"#agents .cell[data-gpu='{gpu}'] .segs i"
    wait_for(browser, f'return document.querySelector("{cell}")')
    title = browser.execute_script(
        f"return document.querySelector(\"#agents .cell[data-gpu='{gpu}']\").title"
    )
    assert "taken by another user" in title
    browser.get(f"{api}/#/agents/{agent}")  # the drill-down draws the topology
    wait_for(browser, f"return document.querySelector('#agent-drawing g#node-gpu{gpu}.held')")
    node = browser.execute_script(
        "const g = document.querySelector('#agent-drawing g#node-gpu' + arguments[0]);"
        "return [g.dataset.job, g.querySelector('title').textContent];",
        gpu,
    )
    assert node == ["", f"GPU{gpu}: taken by another user"]
    assert job["id"] not in browser.find_element("css selector", "body").text
    admin.kill(job["id"])
    assert console_errors(browser) == []


def test_wrong_token_shows_the_sign_in_form(dlc_local, browser):
    _, api, _, _ = dlc_local
    sign_in(browser, f"{api}/?token=not-a-token", "not-a-token")
    wait_for(browser, "return document.getElementById('login-error').textContent")
    assert "Sign-in failed" in browser.find_element("css selector", "#login-error").text
    assert "token" not in browser.current_url  # an old ?token= link is dropped, not used
    # the 401 itself is the only console entry a wrong token may cause
    assert all("401" in e for e in console_errors(browser))


def _create_user_token(db: Path, user: str) -> str:
    """A user token in the running scheduler's store, made as an operator would."""
    out = subprocess.run(
        [sys.executable, "-m", "dlc", "scheduler", "--db", str(db), "--create-token", user],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.strip()


HUE = """
return [...arguments[0]].map(id => {
  const seg = document.querySelector(`#agents .cell[data-job="${id}"] .segs i`);
  return seg ? getComputedStyle(seg).backgroundColor : null;
});
"""


def _hue(css: str) -> float:
    import colorsys

    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", css)[:3])
    return colorsys.rgb_to_hsv(r, g, b)[0] * 360


def _gaps(colours: list[str]) -> list[float]:
    """Hue distance in degrees between every two of ``colours`` (CSS rgb() or #rrggbb)."""
    hues = []
    for c in colours:
        if c.startswith("#"):
            c = "rgb(" + ",".join(str(int(c[i : i + 2], 16)) for i in (1, 3, 5)) + ")"
        hues.append(_hue(c))
    return [min(abs(a - b), 360 - abs(a - b)) for i, a in enumerate(hues) for b in hues[i + 1 :]]


def test_one_users_jobs_get_far_apart_colours(dlc_local, browser):
    dashboard, api, token, _ = dlc_local
    admin = ApiClient(api, token)
    sign_in(browser, dashboard, token)
    jobs = [admin.submit({"image": "none", "gpus": 1, "command": ["sleep", "30"]})["id"]
            for _ in range(3)]  # fmt: skip
    try:
        colours = wait_for(browser, "const c = " + HUE[len("return "):] + "; "
                           "return c.every(Boolean) && c", 30, jobs)  # fmt: skip
        assert min(_gaps(colours)) >= 60, colours
        # six jobs of one user on screen at once still get hues at least 30 degrees apart
        ids = [f"{jobs[0]}-{n}" for n in range(6)]
        six = browser.execute_script(
            "assignColours(arguments[0]); return arguments[0].map(jobColour);", ids
        )
        assert min(_gaps(six)) >= 29, six
    finally:
        for job_id in jobs:
            admin.kill(job_id)


def test_pages_say_what_a_user_may_see_and_number_attempts_from_0(dlc_local, browser):
    _, api, token, db = dlc_local
    admin = ApiClient(api, token)
    job = admin.submit({"image": "none", "gpus": 1, "command": ["true"]})
    bob = _create_user_token(db, "bob")
    sign_in(browser, f"{api}/", bob)
    # the overview's first queue panel lists bob's own jobs only, and says so
    wait_for(browser, "return document.getElementById('queue-title').textContent "
             "=== 'Your queued jobs'")  # fmt: skip
    assert "none of your jobs is waiting" in browser.find_element("css selector", "#queue").text
    # another user's job: "no such job", not "cannot reach the scheduler"
    browser.get(f"{api}/#/jobs/{job['id']}")
    wait_for(browser, "return document.getElementById('job-title').textContent === 'no such job'")
    status = browser.find_element("css selector", "#status").text
    assert "cannot reach" not in status and "no such job" in status
    assert f"no job {job['id']}" in browser.find_element("css selector", "#job-message").text
    # simulated GPUs enforce nothing: the agent page does not claim MPS limits
    agent = admin.show(job["id"])["tasks"][0]["agent_id"]
    browser.get(f"{api}/#/agents/{agent}")
    facts = wait_for(browser, "return document.getElementById('agent-facts').textContent")
    assert "MPS" not in facts and "without limits" in facts
    assert all("404" in e for e in console_errors(browser))
    # the admin's job page numbers attempts from 0, like `dlc status` and `dlc logs --attempt`
    browser.delete_all_cookies()  # sign bob out
    sign_in(browser, f"{api}/", token)
    wait_for(browser, "return document.getElementById('login-view').hidden")
    browser.get(f"{api}/#/jobs/{job['id']}")
    facts = wait_for(browser, "const t = document.getElementById('job-facts').textContent; "
                     "return t.includes('Attempt') && t")  # fmt: skip
    assert "Attempt0 (the first run; retries allowed: 0)" in facts.replace("\n", "")


# Holds the page's /logs requests until the test lets them go: a log read slower than the
# rest of a refresh, made deterministic (installed before the dashboard's script loads).
LOG_GATE = """
window.logGate = { hold: false, held: [] };
const realFetch = window.fetch.bind(window);
window.fetch = (input, init) => {
  const url = String((input && input.url) || input);
  if (!window.logGate.hold || !url.includes("/logs?")) return realFetch(input, init);
  return new Promise((resolve, reject) => {
    window.logGate.held.push(() => realFetch(input, init).then(resolve, reject));
  });
};
window.releaseLogs = () => {
  window.logGate.hold = false;
  for (const go of window.logGate.held.splice(0)) go();
};
"""


def _finished_job_page(dlc_local, browser, word: str, script: str) -> str:
    """A job that echoed ``word`` and finished; the dashboard signed in with ``script``
    installed before its own script loads, after its first render. Returns the job id."""
    dashboard, api, token, _ = dlc_local
    admin = ApiClient(api, token)
    job_id = admin.submit({"image": "none", "gpus": 1, "command": ["echo", word]})["id"]
    deadline = time.monotonic() + 40
    while admin.show(job_id)["state"] != "finished" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert admin.show(job_id)["state"] == "finished"
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": script})
    sign_in(browser, dashboard, token)
    wait_for(browser, "return window.dlcTimings && window.dlcTimings.renders")
    return str(job_id)


def test_a_refresh_asked_for_during_a_slow_log_read_shows_the_chunk_once(dlc_local, browser):
    # a tab click while a refresh waits on /logs used to start a second refresh reading the
    # same offset: both appended the chunk (and two poll loops ran from then on)
    job_id = _finished_job_page(dlc_local, browser, "chunk-one", LOG_GATE)
    browser.execute_script(f"logGate.hold = true; location.hash = '#/jobs/{job_id}';")
    wait_for(browser, "return logGate.held.length === 1")
    browser.find_element("css selector", ".tab[data-stream=stdout]").click()
    # the click either started a second refresh (now held at /logs too) or was chained
    wait_for(browser, "return logGate.held.length === 2 || window.dlcTimings.chained >= 1")
    renders = browser.execute_script("return window.dlcTimings.renders")
    browser.execute_script("releaseLogs()")
    wait_for(browser, f"return window.dlcTimings.renders >= {renders + 2}", 20)
    logs = wait_for_text(browser, "logs", ("chunk-one",), 10)
    assert logs.count("chunk-one") == 1 and logs.count("gpu_ids=") == 1, logs
    assert console_errors(browser) == []


# Holds /logs requests for ever, as a server that never answers would; like a real request
# it gives up when the page aborts it. Requests are given up after 2 s here (dlcRequestMs).
LOG_BLACKHOLE = """
window.dlcRequestMs = 2000;
window.logHole = { hold: false, held: 0 };
const realFetch = window.fetch.bind(window);
window.fetch = (input, init) => {
  const url = String((input && input.url) || input);
  if (!window.logHole.hold || !url.includes("/logs?")) return realFetch(input, init);
  window.logHole.held += 1;
  return new Promise((resolve, reject) => {
    const signal = init && init.signal;
    if (signal) signal.addEventListener("abort", () => reject(signal.reason));
  });
};
"""


def test_a_request_that_never_ends_does_not_freeze_the_page(dlc_local, browser):
    # red-team #49: refreshes run one at a time, and one waiting on an answer that never came
    # held every later one (the poll, tab clicks, new addresses) until the page was reloaded
    job_id = _finished_job_page(dlc_local, browser, "hole-one", LOG_BLACKHOLE)
    browser.execute_script(f"logHole.hold = true; location.hash = '#/jobs/{job_id}';")
    wait_for(browser, "return logHole.held === 1")
    browser.execute_script("logHole.hold = false")
    renders = browser.execute_script("return window.dlcTimings.renders")
    # the held read is given up, and the page goes on refreshing and shows the logs
    wait_for(browser, f"return window.dlcTimings.renders >= {renders + 2}", 20)
    logs = wait_for_text(browser, "logs", ("hole-one",), 10)
    assert logs.count("hole-one") == 1
