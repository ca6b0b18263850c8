# shellcheck shell=bash
# Source this file to point testcontainers-go (and the docker CLI) at the local podman
# API service started by setup-podman.sh:   . ci/containers/env.sh
_cm_ci_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CRASHMATRIX_PODMAN_SOCKET="${CRASHMATRIX_PODMAN_SOCKET:-/run/crashmatrix-podman.sock}"
export DOCKER_HOST="unix://${CRASHMATRIX_PODMAN_SOCKET}"
# The reaper image (ryuk) cannot be pulled here: tests terminate their own containers.
export TESTCONTAINERS_RYUK_DISABLED=true
# Without this testcontainers hands out the podman bridge gateway (10.x); tests may only
# talk to loopback, through the mapped ports.
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
# crashmatrix refuses container endpoints off loopback on these machines.
export CRASHMATRIX_LOOPBACK_ONLY=1
export CONTAINERS_CONF="${_cm_ci_dir}/containers.conf"
unset _cm_ci_dir
