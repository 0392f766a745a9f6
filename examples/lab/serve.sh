#!/bin/sh
# A tiny stand-in for JupyterLab that runs offline in dlc-test/busybox:1 (README, `dlc local`):
# serves lab.sh on $DLC_ENV_PORT, the port DLC took from the offer. Real notebooks: an image
# with JupyterLab (docs/environments.md).
cd "$(dirname "$0")"
date -u +%Y-%m-%dT%H:%M:%SZ > /tmp/last
echo "serving on port $DLC_ENV_PORT (dlc open prints the URL)"
exec nc -ll -p "${DLC_ENV_PORT:-8888}" -e "$PWD/lab.sh"
