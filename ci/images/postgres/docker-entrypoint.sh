#!/usr/bin/env bash
# Entrypoint for localhost/crashmatrix/postgres:15, modelled on the official postgres
# image's docker-entrypoint.sh (subset): POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB,
# POSTGRES_HOST_AUTH_METHOD, POSTGRES_INITDB_ARGS, /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz}.
# Accepts "postgres -c name=value ..." (or just "-c ...") as the command.
set -Eeuo pipefail

PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA

if [[ ${1:-} == -* ]]; then
  set -- postgres "$@"
fi

if [[ ${1:-} != postgres ]]; then
  exec "$@"
fi

if [[ $(id -u) == 0 ]]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chmod 00700 "$PGDATA" 2>/dev/null || true
  chown -R postgres:postgres "$PGDATA"
  chown postgres:postgres /var/run/postgresql
  chmod 03775 /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"

if [[ ! -s $PGDATA/PG_VERSION ]]; then
  if [[ -z ${POSTGRES_PASSWORD:-} && $POSTGRES_HOST_AUTH_METHOD != trust ]]; then
    cat >&2 <<'MSG'
Error: Database is uninitialized and superuser password is not specified.
       You must specify POSTGRES_PASSWORD to a non-empty value for the
       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".
       (or set POSTGRES_HOST_AUTH_METHOD=trust to allow all connections without a password)
MSG
    exit 1
  fi

  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a word list on purpose
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host="$POSTGRES_HOST_AUTH_METHOD" --encoding=UTF8 ${POSTGRES_INITDB_ARGS:-}
  rm -f "$pwfile"

  {
    echo
    echo "host all all all ${POSTGRES_HOST_AUTH_METHOD}"
  } >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"

  # Temporary server, local socket only, as the official image does.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start

  psql_base=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
  if [[ $POSTGRES_DB != postgres ]]; then
    exists=$("${psql_base[@]}" --dbname postgres -tA \
      -v db="$POSTGRES_DB" <<<"SELECT 1 FROM pg_database WHERE datname = :'db';")
    if [[ -z $exists ]]; then
      "${psql_base[@]}" --dbname postgres -v db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
  fi

  echo
  shopt -s nullglob
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh)
        if [[ -x $f ]]; then echo "$0: running $f"; "$f"; else echo "$0: sourcing $f"; . "$f"; fi ;;
      *.sql) echo "$0: running $f"; "${psql_base[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *.sql.gz) echo "$0: running $f"; gunzip -c "$f" | "${psql_base[@]}" --dbname "$POSTGRES_DB" ;;
      *) echo "$0: ignoring $f" ;;
    esac
  done
  shopt -u nullglob

  pg_ctl -D "$PGDATA" -m fast -w stop
  echo
  echo 'PostgreSQL init process complete; ready for start up.'
  echo
fi

exec "$@"
