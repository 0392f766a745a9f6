"""Headless Debian chromium for the dashboard tests (Selenium with the apt chromedriver).

No browser is ever downloaded: the test FAILS with a hint when ``/usr/bin/chromium`` or
``/usr/bin/chromedriver`` is missing (``bash scripts/browser.sh`` installs both).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def start_chromium(profile: Path, width: int = 1440, height: int = 1000):
    """A Selenium Chrome driver over Debian's chromium with a fresh profile in ``profile``."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.fail(f"{path} is missing: run `bash scripts/browser.sh`", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def console_errors(driver) -> list[str]:
    """Browser console entries at error level since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
