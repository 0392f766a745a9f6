#!/usr/bin/env bash
# The main job on the embedded default: `dlc local` simulating a DGX-1 (8 V100, NVLink hybrid
# cube-mesh), one example job submitted with `dlc submit`, run by `dlc executor` in a Docker
# container, then `dlc jobs` and `dlc logs`. Needs the Docker engine and the small local test
# image, which scripts/docker.sh installs/starts/builds (Debian, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
DLC="$VENV/bin/dlc"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dlc-demo.XXXXXX")
LOCAL_PID=

cleanup() {
    if [ -n "$LOCAL_PID" ] && kill -0 "$LOCAL_PID" 2>/dev/null; then
        kill -TERM "$LOCAL_PID"
        wait "$LOCAL_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

bash scripts/docker.sh start >/dev/null

echo "== dlc local --simulate examples/topologies/dgx1-v100.txt"
"$DLC" local --simulate examples/topologies/dgx1-v100.txt --api-port 0 \
    --work-dir "$WORK/state" --token-file "$WORK/token" >"$WORK/local.out" 2>&1 &
LOCAL_PID=$!
for _ in $(seq 150); do
    grep -q 'DLC_API=' "$WORK/local.out" 2>/dev/null && [ -s "$WORK/token" ] && break
    kill -0 "$LOCAL_PID" 2>/dev/null || { cat "$WORK/local.out"; exit 1; }
    sleep 0.2
done
cat "$WORK/local.out"
DLC_API=$(sed -n 's/^  export DLC_API=//p' "$WORK/local.out")
DLC_TOKEN=$(cat "$WORK/token")
export DLC_API DLC_TOKEN

echo "== dlc submit -f examples/hello-local.yaml"
JOB=$("$DLC" submit -f examples/hello-local.yaml)
echo "$JOB"

state=
for _ in $(seq 300); do
    state=$("$DLC" status "$JOB" | sed -n 's/^ *state: //p')
    case "$state" in finished|failed|killed|lost) break ;; esac
    sleep 0.2
done

echo "== dlc jobs"
"$DLC" jobs
echo "== dlc logs $JOB"
"$DLC" logs "$JOB"
[ "$state" = finished ] || { echo "demo job ended $state" >&2; "$DLC" status "$JOB" >&2; exit 1; }
