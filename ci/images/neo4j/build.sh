#!/usr/bin/env bash
# Builds localhost/crashmatrix/neo4j:5.26: Neo4j Community 5.26.x jars from Maven Central
# (mvn dependency:copy-dependencies of org.neo4j:neo4j) on a Debian bookworm rootfs with
# openjdk-17-jre-headless. No registry needed. Does nothing if the image exists, unless
# --force. The rootfs tarball and the jars are cached under /var/cache/crashmatrix/.
#   NEO4J_VERSION=5.26.30 (default) selects the Neo4j version.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CM_LOG_PREFIX=neo4j-image
# shellcheck source=../lib.sh
. "${here}/../lib.sh"

image="${CRASHMATRIX_NEO4J_IMAGE:-localhost/crashmatrix/neo4j:5.26}"
base="localhost/crashmatrix/neo4j-base:5.26"
version="${NEO4J_VERSION:-5.26.30}"
cm_parse_build_args "$@"
cm_need_tools
cm_exit_if_built "$image"
need=()
command -v mvn >/dev/null || need+=(maven)
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
if ((${#need[@]})); then
  cm_log "installing: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

start=$(date +%s)
old_ids=$(podman image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)

# 1. jars
libdir="${CM_CACHE_DIR}/neo4j-${version}-lib"
if [[ ! -s ${libdir}/neo4j-${version}.jar ]]; then
  work=$(mktemp -d "${CM_CACHE_DIR}/neo4j-mvn.XXXXXX")
  cp "${here}/pom.xml" "$work/"
  cm_log "resolving org.neo4j:neo4j:${version} from Maven Central"
  (cd "$work" && MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-XX:-UsePerfData" mvn -B -q -Dneo4j.version="$version" dependency:copy-dependencies \
      -DincludeScope=runtime -DexcludeClassifiers=osx-x86_64,osx-aarch_64 \
      -DoutputDirectory="$work/lib") >&2
  [[ -s $work/lib/neo4j-${version}.jar ]] || { cm_log "ERROR: neo4j-${version}.jar not resolved"; exit 1; }
  rm -rf "$libdir"
  mv "$work/lib" "$libdir"
  rm -rf "$work"
fi
cm_log "$(find "$libdir" -name '*.jar' | wc -l) jars in ${libdir}"

# 2. rootfs
tar=$(cm_rootfs neo4j-jre17 bookworm "openjdk-17-jre-headless,ca-certificates" \
  --customize-hook='chroot "$1" groupadd --system --gid 7474 neo4j && chroot "$1" useradd --system --uid 7474 --gid 7474 --home-dir /var/lib/neo4j --no-create-home --shell /bin/bash neo4j' \
  --customize-hook='mkdir -p "$1"/var/lib/neo4j/conf "$1"/var/lib/neo4j/conf.base "$1"/var/lib/neo4j/data "$1"/var/lib/neo4j/logs "$1"/var/lib/neo4j/import "$1"/var/lib/neo4j/plugins "$1"/var/lib/neo4j/run && chroot "$1" chown -R neo4j:neo4j /var/lib/neo4j')
cm_import "$tar" "$base"

# 3. image
ctx=$(mktemp -d "${CM_CACHE_DIR}/neo4j-ctx.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
cp "${here}/Containerfile" "${here}/neo4j.conf" "${here}/docker-entrypoint.sh" "$ctx/"
cp -a "$libdir" "$ctx/lib"
mkdir -p "$ctx/launcher"
javac -J-XX:-UsePerfData --release 17 -d "$ctx/classes" "${here}/Launcher.java"
# a jar, not a class directory: class data sharing refuses non-empty directories
jar -J-XX:-UsePerfData --create --file "$ctx/launcher/crashmatrix-neo4j-launcher.jar" -C "$ctx/classes" .
cm_log "podman build ${image} (Neo4j ${version})"
podman build --pull=never --build-arg "BASE=${base}" --label "org.neo4j.version=${version}" \
  -t "$image" -f "$ctx/Containerfile" "$ctx" >&2

# 4. class data sharing archive: one training start of the server records the classes it
#    loads (-XX:ArchiveClassesAtExit); the entrypoint maps the archive at every start,
#    which saves ~1.5 s (about 20 %) of each Neo4j start here. Optional: on failure the
#    image stays as built above.
if [[ ${CRASHMATRIX_NEO4J_CDS:-1} == 1 ]]; then
  train="crashmatrix-neo4j-cds-train-$$"
  cm_log "training run for the class data sharing archive"
  podman rm -f "$train" >/dev/null 2>&1 || true
  podman run -d --name "$train" --network=none -e NEO4J_AUTH=neo4j/cds-training \
    -e NEO4J_JAVA_OPTS="-XX:ArchiveClassesAtExit=/var/lib/neo4j/data/neo4j.jsa -Xlog:cds=error" \
    "$image" >/dev/null
  ok=0
  for _ in $(seq 1 240); do
    if podman logs "$train" 2>&1 | grep -q 'INFO  Started\.'; then ok=1; break; fi
    [[ $(podman inspect -f '{{.State.Running}}' "$train") == true ]] || break
    sleep 0.5
  done
  if ((ok)); then
    podman stop -t 120 "$train" >/dev/null
    podman cp "$train:/var/lib/neo4j/data/neo4j.jsa" "$ctx/neo4j.jsa" 2>/dev/null || ok=0
  fi
  podman rm -f "$train" >/dev/null 2>&1 || true
  if ((ok)) && [[ -s $ctx/neo4j.jsa ]]; then
    old_ids+=" $(podman image inspect -f '{{.Id}}' "$image")"
    printf 'FROM %s\nCOPY neo4j.jsa /var/lib/neo4j/launcher/neo4j.jsa\n' "$image" >"$ctx/Containerfile.cds"
    podman build --pull=never -t "$image" -f "$ctx/Containerfile.cds" "$ctx" >&2
  else
    cm_log "WARNING: no class data sharing archive (training start failed); image works without it"
  fi
fi
cm_drop_old_images "$image" $old_ids
cm_log "built ${image} in $(( $(date +%s) - start )) s"
