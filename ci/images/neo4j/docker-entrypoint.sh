#!/usr/bin/env bash
# Entrypoint of localhost/crashmatrix/neo4j:5.26, modelled on the official neo4j image:
#   NEO4J_AUTH=none | neo4j/<password>     (password: at least 8 characters, not "neo4j")
#   NEO4J_<setting with . as _ and _ as __>=value  -> neo4j.conf
#   CMD "neo4j" starts the server in the foreground (console mode, logs on stdout:
#   "Bolt enabled on 0.0.0.0:7687.", "HTTP enabled on 0.0.0.0:7474.", "Started.").
# Heap: -Xms/-Xmx from NEO4J_server_memory_heap_{initial,max}__size (default 256m/512m).
set -Eeuo pipefail

NEO4J_HOME="${NEO4J_HOME:-/var/lib/neo4j}"
export NEO4J_HOME
export NEO4J_CONF="${NEO4J_HOME}/conf"
conf="${NEO4J_CONF}/neo4j.conf"

if [[ ${1:-} != neo4j ]]; then
  exec "$@"
fi

if [[ $(id -u) == 0 ]]; then
  mkdir -p "$NEO4J_HOME"/{conf,data,logs,import,plugins,run}
  chown -R neo4j:neo4j "$NEO4J_HOME"/{conf,data,logs,import,plugins,run}
  exec setpriv --reuid=neo4j --regid=neo4j --init-groups "${BASH_SOURCE[0]}" "$@"
fi

cp "${NEO4J_HOME}/conf.base/neo4j.conf" "$conf"

set_conf() {  # set_conf KEY VALUE: replace or append a setting
  local key=$1 value=$2
  sed -i "/^${key//./\\.}=.*/d" "$conf"
  printf '%s=%s\n' "$key" "$value" >>"$conf"
}

# --- NEO4J_AUTH ---------------------------------------------------------------------
initial_password=""
auth="${NEO4J_AUTH:-}"
if [[ $auth == none ]]; then
  set_conf dbms.security.auth_enabled false
elif [[ -n $auth ]]; then
  user="${auth%%/*}"
  initial_password="${auth#*/}"
  if [[ $auth != */* || $user != neo4j ]]; then
    echo >&2 "Invalid value for NEO4J_AUTH: '${auth}'. It must be 'none' or 'neo4j/<password>'."
    exit 1
  fi
  if [[ $initial_password == neo4j ]]; then
    echo >&2 "Invalid value for password. It cannot be 'neo4j', which is the default."
    exit 1
  fi
  min_len="${NEO4J_dbms_security_auth__minimum__password__length:-8}"
  if ((${#initial_password} < min_len)); then
    echo >&2 "Invalid value for password. The minimum password length is ${min_len} characters (NEO4J_AUTH=neo4j/<password>)."
    exit 1
  fi
  set_conf dbms.security.auth_enabled true
else
  set_conf dbms.security.auth_enabled true
fi

# --- NEO4J_* settings -----------------------------------------------------------------
not_settings=" NEO4J_AUTH NEO4J_AUTH_PATH NEO4J_HOME NEO4J_CONF NEO4J_ACCEPT_LICENSE_AGREEMENT
  NEO4J_EDITION NEO4J_PLUGINS NEO4J_DEBUG NEO4J_SHA256 NEO4J_TARBALL NEO4J_DEPRECATION_WARNING
  NEO4J_SHUTDOWN_TIMEOUT NEO4J_JAVA_OPTS "
while IFS= read -r var; do
  [[ $not_settings == *" ${var} "* || $not_settings == *" ${var}"$'\n'* ]] && continue
  value="${!var}"
  [[ -n $value ]] || continue
  setting="${var#NEO4J_}"
  setting="${setting//__/@}"; setting="${setting//_/.}"; setting="${setting//@/_}"
  [[ $setting =~ ^[0-9] ]] && continue
  set_conf "$setting" "$value"
done < <(compgen -e | grep '^NEO4J_' | sort)

if [[ -n ${NEO4JLABS_PLUGINS:-} || -n ${NEO4J_PLUGINS:-} ]]; then
  echo >&2 "WARNING: plugins (${NEO4JLABS_PLUGINS:-}${NEO4J_PLUGINS:-}) are not supported by this image (no download possible); ignored."
fi

java_opts=(
  "-Xms${NEO4J_server_memory_heap_initial__size:-256m}"
  "-Xmx${NEO4J_server_memory_heap_max__size:-512m}"
  -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow -XX:+UnlockExperimentalVMOptions
  -XX:+TrustFinalNonStaticFields -XX:+DisableExplicitGC
  -Djdk.nio.maxCachedBufferSize=1024 -Dio.netty.tryReflectionSetAccessible=true
  -Djdk.tls.ephemeralDHKeySize=2048 -Djdk.tls.rejectClientInitiatedRenegotiation=true
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  -Dlog4j2.disable.jmx=true -Dfile.encoding=UTF-8
)
# class data sharing archive recorded at image build (see build.sh); -Xshare:auto default,
# so a mismatch only costs the speed-up
if [[ -s ${NEO4J_HOME}/launcher/neo4j.jsa && ${NEO4J_JAVA_OPTS:-} != *SharedArchiveFile* && ${NEO4J_JAVA_OPTS:-} != *ArchiveClassesAtExit* ]]; then
  java_opts+=("-XX:SharedArchiveFile=${NEO4J_HOME}/launcher/neo4j.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
fi
# shellcheck disable=SC2206 # extra options are a word list on purpose
java_opts+=(${NEO4J_JAVA_OPTS:-})

# Launcher (Launcher.java) writes the initial password (what neo4j-admin dbms
# set-initial-password does) and runs org.neo4j.server.CommunityEntryPoint in one JVM.
export CRASHMATRIX_NEO4J_INITIAL_PASSWORD="$initial_password"
exec java "${java_opts[@]}" -cp "${NEO4J_HOME}/launcher/crashmatrix-neo4j-launcher.jar:${NEO4J_HOME}/lib/*" Launcher \
  --home-dir="$NEO4J_HOME" --config-dir="$NEO4J_CONF" --console-mode
