# shellcheck shell=bash
# scripts/throwaway-postgres.sh: a throwaway PostgreSQL server, for the
# benchmark's PostgreSQL arms (bench/run_all.sh, bench/postgres_smoke_test.sh)
# and deploy/local-cluster.sh --postgres. Source it, then:
#
#   pg_server_start [DIR]      # sets pg_conninfo_file; returns 1 on failure
#   build/bin/granary-bench ... --postgres_file="$pg_conninfo_file"
#   pg_server_stop             # idempotent; call it from the EXIT trap
#
# The server: initdb in DIR, or in a fresh directory under /tmp (also when
# run as root and the `postgres` system user, which the server runs as
# because PostgreSQL refuses root, cannot reach DIR), listening on 127.0.0.1
# only at a free port, scram-sha-256 password
# authentication with a random password, and fsync and synchronous_commit
# left on: the PostgreSQL arms measure synced commits. The connection string
# is in "$pg_conninfo_file", mode 0600, never on a command line.
#
# pg_server_stop removes a fresh directory, and leaves DIR (with the
# server's log) where it was.
#
# Needs bash. Sets these globals (and touches no other of the caller's):
# pg_dir, pg_bin, pg_port, pg_conninfo_file, pg_dir_is_ours.

pg_dir=""
pg_dir_is_ours=""
pg_bin=""
pg_port=""
pg_conninfo_file=""

# pg_as_server_user CMD...: runs CMD as the server's user.
pg_as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The newest installed PostgreSQL's bin directory (as tests/postgres_server.cc
# finds it), or nothing.
pg_find_bin() {
  local best="" d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] || continue
    if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n 1)" = "$d" ]; then
      best=$d
    fi
  done
  printf '%s' "$best"
}

pg_server_start() {
  pg_bin=$(pg_find_bin)
  if [ -z "$pg_bin" ]; then
    echo "throwaway-postgres.sh: no PostgreSQL server under /usr/lib/postgresql" \
         "(scripts/install-deps.sh installs it)" >&2
    return 1
  fi
  pg_dir=""
  if [ -n "${1:-}" ] && mkdir -p "$1"; then
    pg_dir=$(cd "$1" && pwd)
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres: "$pg_dir" 2> /dev/null || true
      runuser -u postgres -- test -w "$pg_dir" 2> /dev/null || pg_dir=""
    fi
    pg_dir_is_ours=""
  fi
  if [ -z "$pg_dir" ]; then
    pg_dir=$(mktemp -d /tmp/granary-pg-XXXXXX) || return 1
    pg_dir_is_ours=yes
  fi
  rm -rf "$pg_dir/data"
  chmod 700 "$pg_dir"
  local password
  password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  (umask 077; printf '%s\n' "$password" > "$pg_dir/pwfile")
  if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres > /dev/null 2>&1; then
      echo "throwaway-postgres.sh: no \`postgres\` system user (the postgresql" \
           "package creates it)" >&2
      return 1
    fi
    chown postgres: "$pg_dir" "$pg_dir/pwfile"
  fi
  if ! pg_as_server_user "$pg_bin/initdb" -D "$pg_dir/data" -U granary \
      --pwfile="$pg_dir/pwfile" --auth-local=scram-sha-256 \
      --auth-host=scram-sha-256 -E UTF8 > "$pg_dir/initdb.log" 2>&1; then
    echo "throwaway-postgres.sh: initdb failed:" >&2
    tail -n 20 "$pg_dir/initdb.log" >&2
    return 1
  fi
  rm -f "$pg_dir/pwfile"
  pg_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # fsync and synchronous_commit are on (PostgreSQL's defaults), stated
  # here so no configuration file can turn them off.
  if ! pg_as_server_user "$pg_bin/pg_ctl" -D "$pg_dir/data" \
      -l "$pg_dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$pg_dir -c fsync=on -c synchronous_commit=on -c max_connections=600" \
      start > /dev/null; then
    echo "throwaway-postgres.sh: PostgreSQL did not start:" >&2
    tail -n 20 "$pg_dir/server.log" >&2
    return 1
  fi
  pg_conninfo_file="$pg_dir/conninfo"
  (umask 077
   printf 'host=127.0.0.1 port=%s dbname=postgres user=granary password=%s connect_timeout=10\n' \
       "$pg_port" "$password" > "$pg_conninfo_file")
  echo "== PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}'): 127.0.0.1:$pg_port (fsync and synchronous_commit on; $pg_dir)"
}

pg_server_stop() {
  [ -n "$pg_dir" ] || return 0
  if [ -f "$pg_dir/data/postmaster.pid" ]; then
    pg_as_server_user "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w -t 60 stop \
        > /dev/null 2>&1 || true
  fi
  [ -z "$pg_dir_is_ours" ] || rm -rf "$pg_dir"
  pg_dir=""
}
