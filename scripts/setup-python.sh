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
# `dlc topology --png` converts with CairoSVG, which loads the system cairo library; the
# pictures name the DejaVu Sans font.
if ! ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2' \
    || [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcairo2 fonts-dejavu-core
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# pymesos 0.3.15 depends on `http-parser`, whose only release (0.9.0) does not build on
# Python 3.11+ (Cython-generated C includes longintrepr.h; setup.py imports imp/distutils).
# DLC ships a small pure-Python distribution of the same name (compat/http-parser) providing
# just the response-parser API pymesos uses; installing it first makes pip accept it as
# pymesos's `http-parser` requirement.
"$VENV/bin/python" -m pip install -q ./compat/http-parser
"$VENV/bin/python" -m pip install -q -e '.[test]'
