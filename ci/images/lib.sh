# shellcheck shell=bash
# Helpers shared by ci/images/*/build.sh. Source it; needs bash and root.

CM_CACHE_DIR="${CRASHMATRIX_CACHE_DIR:-/var/cache/crashmatrix}"
CM_IMAGES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CM_CONTAINERS_CONF="${CM_IMAGES_DIR}/../containers/containers.conf"
CM_CONTAINERS_CONF="$(cd "$(dirname "$CM_CONTAINERS_CONF")" && pwd)/containers.conf"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CM_CONTAINERS_CONF}"

cm_log() { echo "[$(date -u +%H:%M:%S)] ${CM_LOG_PREFIX:-build}: $*" >&2; }

# cm_need_tools: installs podman, runc and mmdebstrap when missing (the image build needs
# the podman CLI, not the API service of ci/containers/setup-podman.sh).
cm_need_tools() {
  local p missing=()
  for p in podman runc mmdebstrap uidmap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    cm_log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}

cm_image_exists() { podman image exists "$1"; }

# cm_rootfs NAME SUITE PACKAGES(comma-separated) [extra mmdebstrap args...]
# Prints the path of a cached rootfs tarball, creating it with mmdebstrap if missing.
# The file name carries a hash of the recipe, so a changed package list makes a new one.
cm_rootfs() {
  local name=$1 suite=$2 include=$3; shift 3
  local key tar tmp
  key=$(printf '%s\n' "$suite" "$include" "$@" | sha256sum | cut -c1-12)
  tar="${CM_CACHE_DIR}/${name}-${suite}-${key}.tar"
  if [[ -s $tar && ${CM_REFRESH_ROOTFS:-0} != 1 ]]; then
    cm_log "reusing cached rootfs ${tar}"
  else
    mkdir -p "$CM_CACHE_DIR"
    tmp="${tar%.tar}.tmp$$.tar"
    rm -rf "$tmp"
    cm_log "mmdebstrap ${suite} (+${include}) -> ${tar}"
    # No mirror argument: mmdebstrap uses this machine's own apt sources.
    mmdebstrap --variant=apt --include="$include" \
      --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
      --format=tar "$@" "$suite" "$tmp" >&2
    mv -f "$tmp" "$tar"
  fi
  echo "$tar"
}

# cm_import TAR BASE_IMAGE: (re)imports the rootfs tarball as a base image.
cm_import() {
  local tar=$1 base=$2
  podman rmi -f "$base" >/dev/null 2>&1 || true
  cm_log "podman import ${tar} ${base}"
  podman import "$tar" "$base" >/dev/null
}

# cm_drop_old_images IMAGE OLD_ID...: removes earlier builds of IMAGE that are no longer
# tagged (only those IDs; a removal that fails, e.g. an image still used, is ignored).
cm_drop_old_images() {
  local image=$1 new id; shift
  new=$(podman image inspect -f '{{.Id}}' "$image")
  for id in "$@"; do
    [[ -n $id && $id != "$new" ]] && podman rmi "$id" >/dev/null 2>&1 || true
  done
}

# cm_parse_build_args "$@": --force rebuilds the image, --refresh-rootfs also
# re-creates the cached rootfs; sets CM_FORCE.
cm_parse_build_args() {
  CM_FORCE=0
  local a
  for a in "$@"; do
    case "$a" in
      --force) CM_FORCE=1 ;;
      --refresh-rootfs) CM_FORCE=1; export CM_REFRESH_ROOTFS=1 ;;
      -h|--help) echo "usage: $0 [--force] [--refresh-rootfs]"; exit 0 ;;
      *) echo "unknown argument: $a" >&2; exit 2 ;;
    esac
  done
}

# cm_exit_if_built IMAGE: built once, reused: exit 0 when IMAGE exists and
# no rebuild was asked for.
cm_exit_if_built() {
  if ((!CM_FORCE)) && cm_image_exists "$1"; then
    cm_log "$1 already exists (use --force to rebuild)"
    exit 0
  fi
}
