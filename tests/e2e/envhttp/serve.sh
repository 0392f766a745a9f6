#!/bin/sh
# A stand-in for `jupyter lab` in CI (no network to install it): serves handler.sh on $DLC_ENV_PORT.
date -u +%Y-%m-%dT%H:%M:%SZ > /tmp/last
exec nc -ll -p "${DLC_ENV_PORT:-8888}" -e /srv/handler.sh
