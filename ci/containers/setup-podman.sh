#!/usr/bin/env bash
# Installs podman (from Debian) when missing and starts its Docker-compatible API
# service on unix:///run/crashmatrix-podman.sock, so that testcontainers-go can run
# containers on machines without a Docker engine. Idempotent; run as root.
#
# Usage: ci/containers/setup-podman.sh        (then: . ci/containers/env.sh)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
conf="${here}/containers.conf"
sock="${CRASHMATRIX_PODMAN_SOCKET:-/run/crashmatrix-podman.sock}"
pidfile="${CRASHMATRIX_PODMAN_PIDFILE:-/run/crashmatrix-podman.pid}"
sumfile="${pidfile%.pid}.confsum"
logfile="${CRASHMATRIX_PODMAN_LOG:-/var/log/crashmatrix-podman.log}"

log() { echo "setup-podman: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  log "must run as root"; exit 1
fi

# --- packages -------------------------------------------------------------------
pkgs=(podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs curl ca-certificates libfaketime)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

# --- service --------------------------------------------------------------------
answering() {
  curl -fsS --max-time 3 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1
}

confsum() { sha256sum "$conf" | cut -d' ' -f1; }

# PID of a running "podman system service ... unix://$sock", from the pid file or /proc.
service_pid() {
  local pid
  if [[ -s $pidfile ]]; then
    pid=$(<"$pidfile")
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "system service.*unix://${sock}"; then
      echo "$pid"; return 0
    fi
  fi
  for d in /proc/[0-9]*; do
    [[ -r $d/cmdline ]] || continue
    if tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q "^podman system service .*unix://${sock} *$"; then
      echo "${d#/proc/}"; return 0
    fi
  done
  return 1
}

service_conf() {  # CONTAINERS_CONF in the environment of PID $1
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^CONTAINERS_CONF=//p'
}

stop_service() {
  local pid=$1 i
  log "stopping podman service (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    [[ -d /proc/$pid ]] || break
    sleep 0.2
  done
  if [[ -d /proc/$pid ]]; then kill -9 "$pid" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$pidfile" "$sumfile" "$sock"
}

need_start=1
if pid=$(service_pid); then
  # A service whose working directory was deleted (a removed checkout)
  # cannot start containers: conmon fails with "Failed to get working
  # directory" and the API answers "write child: broken pipe".
  cwd_gone=0
  if [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == *" (deleted)" ]] || ! [[ -d /proc/$pid/cwd/ ]]; then cwd_gone=1; fi
  if ((cwd_gone == 0)) && [[ $(service_conf "$pid") == "$conf" && -s $sumfile && $(<"$sumfile") == "$(confsum)" ]] && answering; then
    need_start=0
    echo "$pid" >"$pidfile"
    log "podman service already running (pid $pid) with ${conf}"
  else
    log "podman service (pid $pid) runs with other settings (CONTAINERS_CONF=$(service_conf "$pid"), ${conf} changed since, or its working directory is gone): restarting"
    stop_service "$pid"
  fi
elif answering; then
  log "ERROR: something else answers on ${sock} (not a podman service this script knows); stop it or set CRASHMATRIX_PODMAN_SOCKET"
  exit 1
fi

if ((need_start)); then
  rm -f "$sock"
  mkdir -p "$(dirname "$logfile")"
  log "starting: CONTAINERS_CONF=${conf} podman system service --time=0 unix://${sock} (log: ${logfile})"
  # Run from / so that removing the checkout never pulls the service's
  # working directory from under conmon.
  (cd / && CONTAINERS_CONF="$conf" exec setsid nohup podman system service --time=0 "unix://${sock}" \
    </dev/null >>"$logfile" 2>&1) &
  echo $! >"$pidfile"
  confsum >"$sumfile"
  for i in $(seq 1 150); do
    if answering; then break; fi
    if ! [[ -d /proc/$(<"$pidfile") ]]; then
      log "ERROR: podman service exited; last log lines:"; tail -20 "$logfile" >&2; exit 1
    fi
    sleep 0.2
  done
  if ! answering; then
    log "ERROR: ${sock} does not answer after 30 s; last log lines:"; tail -20 "$logfile" >&2; exit 1
  fi
  log "podman service up (pid $(<"$pidfile"))"
fi

# Engine sanity: the configured runtime must be runc.
rt=$(CONTAINERS_CONF="$conf" podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || true)
[[ $rt == runc ]] || log "WARNING: podman OCI runtime is '${rt}', expected runc"

cat <<ENV
export DOCKER_HOST=unix://${sock}
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
export CONTAINERS_CONF=${conf}
ENV
