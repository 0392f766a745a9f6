#!/bin/sh
# One HTTP request on stdin/stdout (busybox `nc -ll -e`), answered the way JupyterLab answers
# what DLC relies on: every path wants ?token=$JUPYTER_TOKEN (403 without it), /api/status
# reports last_activity (DLC's idle stop reads it; it is not activity itself), any other path
# is activity and gets a small page.
read -r method path proto
while read -r line; do
  line=$(echo "$line" | tr -d '\r')
  [ -z "$line" ] && break
done
case "$path" in
  *"token=$JUPYTER_TOKEN"*) ok=1 ;;
  *) ok=0 ;;
esac
if [ -z "$JUPYTER_TOKEN" ] || [ "$ok" = 0 ]; then
  printf 'HTTP/1.0 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden'
  exit 0
fi
case "$path" in
  /api/status*) body="{\"last_activity\": \"$(cat /tmp/last)\"}" ;;
  *) date -u +%Y-%m-%dT%H:%M:%SZ > /tmp/last
     body="lab on $(hostname): GPU share ${DLC_GPU_MEMORY_MIB:-none} MiB, code in /workspace" ;;
esac
printf 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %s\r\n\r\n%s' "${#body}" "$body"
