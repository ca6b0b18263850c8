#!/usr/bin/env bash
# Stops the podman API service started by setup-podman.sh (by its PID). Idempotent.
set -euo pipefail
sock="${CRASHMATRIX_PODMAN_SOCKET:-/run/crashmatrix-podman.sock}"
pidfile="${CRASHMATRIX_PODMAN_PIDFILE:-/run/crashmatrix-podman.pid}"
sumfile="${pidfile%.pid}.confsum"
if [[ ! -s $pidfile ]]; then
  echo "teardown: no ${pidfile}; nothing to stop" >&2
  exit 0
fi
pid=$(<"$pidfile")
if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "system service"; then
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    [[ -d /proc/$pid ]] || break
    sleep 0.2
  done
  if [[ -d /proc/$pid ]]; then kill -9 "$pid" 2>/dev/null || true; fi
  echo "teardown: stopped podman service (pid ${pid})" >&2
else
  echo "teardown: pid ${pid} is not a podman service any more" >&2
fi
rm -f "$pidfile" "$sumfile" "$sock"
