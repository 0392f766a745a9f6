#!/usr/bin/env bash
# The main job on the embedded default. Until the scheduler lands this prints the
# topology report of a bundled example machine.
set -euo pipefail
VENV=${VENV:-.venv}
"$VENV/bin/dlc" topology --from-file examples/topologies/dgx1-v100.txt
