"""Make the README's dashboard screenshot: ``python -m tests.web.screenshot OUT.png``.

Runs ``dlc local`` in-process on the simulated DGX-1 with the stand-in executor, submits a
few jobs of three users over ~30 s (so the plots have a history), and photographs the main
page in headless chromium at 1440 px, scaled to keep the PNG small. Not a test: pytest does
not collect it; the browser tests save their own screenshots under build/test-artifacts/.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from tests.web.browser import console_errors, start_chromium

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = f"{sys.executable} {ROOT / 'tests' / 'scheduler' / 'stand_in_executor.py'}"

#: (user, seconds after start, job spec)
SCENE = [
    ("admin", 0, {"image": "none", "name": "nccl-check", "gpus": 1,
                  "command": ["sh", "-c", "sleep 2"]}),
    ("alice", 3, {"framework": "pytorch:2.3.1", "name": "resnet50", "gpus": 4,
                  "command": ["sh", "-c", "echo epoch 1; sleep 600"]}),
    ("bob", 8, {"framework": "pytorch:2.3.1", "name": "bert-finetune", "gpus": 2,
                "command": ["sh", "-c", "sleep 600"]}),
    ("admin", 12, {"image": "none", "name": "burn-in", "gpus": 1, "command": ["sleep", "600"]}),
    ("alice", 16, {"framework": "pytorch:2.3.1", "name": "gpt-small", "gpus": 4,
                   "command": ["sleep", "600"]}),
    ("bob", 20, {"framework": "pytorch:2.3.1", "name": "vit-large", "gpus": 2,
                 "command": ["sleep", "600"]}),
]  # fmt: skip


def main(out: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="dlc-shot-"))
    config = LocalConfig(
        simulate=str(ROOT / "examples/topologies/dgx1-v100.txt"), work_dir=str(work),
        api_port=0, cpus=64, mem_mib=512 * 1024, executor_command=STAND_IN,
    )  # fmt: skip
    cluster = LocalCluster(config).start()
    service = cluster.service
    service.dashboard.sampler.interval_s = 1.0
    clients = {"admin": ApiClient(service.api_url, cluster.admin_token)}
    for user in ("alice", "bob"):
        clients[user] = ApiClient(service.api_url, service.store.add_token(user))
    started = time.monotonic()
    for user, at, spec in SCENE:
        time.sleep(max(0.0, started + at - time.monotonic()))
        clients[user].submit(spec)
    time.sleep(10)
    driver = start_chromium(work / "profile", 1440, 1000)
    try:
        driver.get(f"{service.api_url}/")
        time.sleep(1)
        driver.find_element("css selector", "#token-input").send_keys(cluster.admin_token)
        driver.find_element("css selector", "#login-form button[type=submit]").click()
        time.sleep(4)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1440, height + 200)  # the window's height includes its frame
        time.sleep(2.5)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        raw = work / "raw.png"
        driver.save_screenshot(str(raw))
        errors = console_errors(driver)
    finally:
        driver.quit()
        for client in clients.values():
            for job in client.jobs():
                if job["state"] in ("queued", "staging", "running"):
                    client.kill(job["id"])
        cluster.stop()
    if errors:
        raise SystemExit(f"console errors: {errors}")
    _shrink(raw, Path(out), height)
    print(f"wrote {out} ({Path(out).stat().st_size // 1024} KB)")


def _shrink(raw: Path, out: Path, height: int, width: int = 1200) -> None:
    from PIL import Image

    with Image.open(raw) as img:
        img = img.convert("RGB").crop((0, 0, img.width, min(img.height, height)))
        img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
        out.parent.mkdir(parents=True, exist_ok=True)
        img.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/images/dashboard.png")
