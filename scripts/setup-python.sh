#!/usr/bin/env bash
# Create the project's virtual environment and install DLC with its test tools.
# Works on a fresh Debian machine as root: installs python3-venv when missing.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
# apt and pip talk a lot (setuptools deprecation notices, index warnings): all of it goes to
# a log file, and only a failure shows it (its last lines and where the rest is).
# One log per checkout: two checkouts set up at once must not truncate each other's log.
LOG=${DLC_SETUP_LOG:-${TMPDIR:-/tmp}/dlc-setup-$(id -u)-$(pwd -P | cksum | cut -d' ' -f1).log}
: >"$LOG"

quietly() {
    if ! "$@" >>"$LOG" 2>&1; then
        echo "setup failed: $*" >&2
        grep -vi "deprecat" "$LOG" | tail -n 20 >&2
        echo "setup failed; the whole output is in $LOG" >&2
        exit 1
    fi
}

echo "setting up $VENV (installer output: $LOG)"

if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    quietly apt-get update -qq
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-dev build-essential
fi
# `dlc topology --png` converts with CairoSVG, which loads the system cairo library; the
# pictures name the DejaVu Sans font.
if ! ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2' \
    || [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
    quietly apt-get update -qq
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcairo2 fonts-dejavu-core
fi
quietly "$PYTHON" -m venv "$VENV"
quietly "$VENV/bin/python" -m pip install -q --upgrade pip
# pymesos 0.3.15 depends on `http-parser`, whose only release (0.9.0) does not build on
# Python 3.11+ (Cython-generated C includes longintrepr.h; setup.py imports imp/distutils).
# DLC ships a small pure-Python distribution of the same name (compat/http-parser) providing
# just the response-parser API pymesos uses; installing it first makes pip accept it as
# pymesos's `http-parser` requirement.
quietly "$VENV/bin/python" -m pip install -q ./compat/http-parser
quietly "$VENV/bin/python" -m pip install -q -e '.[test]'
echo "set up $VENV"
