#!/usr/bin/env bash
# Builds localhost/crashmatrix/postgres:15 from Debian bookworm packages (no registry).
# Does nothing if the image exists, unless --force. The mmdebstrap rootfs tarball is
# cached under /var/cache/crashmatrix/ (--refresh-rootfs re-creates it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CM_LOG_PREFIX=postgres-image
# shellcheck source=../lib.sh
. "${here}/../lib.sh"

image="${CRASHMATRIX_POSTGRES_IMAGE:-localhost/crashmatrix/postgres:15}"
base="localhost/crashmatrix/postgres-base:15"
cm_parse_build_args "$@"
cm_need_tools
cm_exit_if_built "$image"

start=$(date +%s)
old_ids=$(podman image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
tar=$(cm_rootfs postgres15 bookworm "postgresql-15,ca-certificates,tzdata" \
  --customize-hook='rm -rf "$1"/etc/postgresql/15/main "$1"/var/lib/postgresql/15' \
  --customize-hook='mkdir -p "$1"/docker-entrypoint-initdb.d "$1"/var/lib/postgresql/data && chroot "$1" chown -R postgres:postgres /var/lib/postgresql')
cm_import "$tar" "$base"
cm_log "podman build ${image}"
podman build --pull=never --build-arg "BASE=${base}" -t "$image" -f "${here}/Containerfile" "$here" >&2
cm_drop_old_images "$image" $old_ids
cm_log "built ${image} in $(( $(date +%s) - start )) s"
