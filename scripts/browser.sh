#!/usr/bin/env bash
# Install Debian's chromium and chromedriver for the dashboard's `browser`-marked tests
# (tests/web/test_dashboard_browser.py drives them with Selenium; no browser is downloaded).
# Idempotent; needs root (apt-get) only when something is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# fonts-dejavu-core: the topology drawings and the page name DejaVu Sans.
apt-get install -y -qq chromium chromium-driver fonts-dejavu-core
chromium --version
