#!/usr/bin/env bash
# Create the project's virtual environment and install DLC with its test tools.
# Works on a fresh Debian machine as root: installs python3-venv when missing.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-dev build-essential
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[test]'
