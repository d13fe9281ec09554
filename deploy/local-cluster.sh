#!/usr/bin/env bash
# deploy/local-cluster.sh N [--postgres[=CONNINFO]] [--tls=DIR]
#     [--tls_ca=CA --tls_cert=CERT --tls_key=KEY] [--token_file=FILE]:
# a cluster of N granary-silo processes on 127.0.0.1 with free ports. Waits
# for every READY line, prints the gateway list, the flags clients need
# (with TLS or a token), one line per silo and a `granary` command that
# reaches the cluster, then runs until Ctrl-C (or SIGTERM), which stops
# every silo gracefully.
#
# Without --postgres: a dev cluster. The first silo is the primary (it holds
# the membership table, grain state and reminders); the others join it with
# --primary.
# With --postgres: N equal silos (--cluster=postgres) on the PostgreSQL
# database CONNINFO, migrated first (granary db migrate). With no CONNINFO
# the script starts a throwaway PostgreSQL server of its own
# (scripts/throwaway-postgres.sh): initdb in the cluster's folder (under /tmp
# when run as root and the `postgres` user cannot reach that folder),
# loopback only, a free port, a random password; Ctrl-C stops it after the
# silos.
#
# With --tls=DIR: TLS on every port but the admin HTTP one, with development
# certificates in DIR (made by scripts/dev-certs.sh DIR when DIR has no
# ca.pem yet; re-run that script to rotate them while the cluster runs).
# The gateways serve DIR/gateway.pem, which clients check with
# --tls_ca=DIR/ca.pem; the silos talk to each other over mutual TLS with
# DIR/silo.pem, of the cluster CA DIR/cluster-ca.pem.
# With --tls_ca=CA --tls_cert=CERT --tls_key=KEY (all three or none): the
# gateways serve CERT and KEY instead, and require client certificates that
# chain to CA (mutual TLS). CA is also what clients check the gateways
# against, so it must have issued CERT too (as DIR/ca.pem issued
# DIR/gateway.pem and DIR/client.pem). It needs --tls=DIR, whose cluster
# certificates the silos still use between them.
# With --token_file=FILE (and --tls=DIR): every gateway call needs the
# bearer token FILE holds (the silos get a tokens file, read at start, that
# names its holder dev-client); clients pass the same --token_file.
# CLIENT_FLAGS=... lists the client flags (granary, granary-bench, the
# client SDK's ClientOptions::security); CLIENT.pem and CLIENT.key there
# stand for a client certificate of CA, unless CA is DIR/ca.pem, whose
# DIR/client.pem the script names.
#
#   deploy/local-cluster.sh 3
#   deploy/local-cluster.sh 3 --postgres
#   GATEWAYS=127.0.0.1:41231,127.0.0.1:35117,127.0.0.1:44381
#   build/bin/granary --gateway=127.0.0.1:41231 cluster
#
#   deploy/local-cluster.sh 3 --tls=certs --token_file=certs/token
#   CLIENT_FLAGS=--tls_ca=certs/ca.pem --token_file=certs/token
#   build/bin/granary --gateway=127.0.0.1:41231 --tls_ca=certs/ca.pem \
#       --token_file=certs/token cluster
#
# Environment: GRANARY_BIN (default build/bin), GRANARY_CLUSTER_DIR (the
# silos' data directories, default ./granary-cluster), extra granary-silo
# flags in GRANARY_SILO_FLAGS.
set -euo pipefail

# usage [WHAT IS WRONG]
usage() {
  [ $# -eq 0 ] || echo "local-cluster.sh: $*" >&2
  echo "usage: local-cluster.sh N [--postgres[=CONNINFO]] [--tls=DIR]" \
       "[--tls_ca=CA --tls_cert=CERT --tls_key=KEY] [--token_file=FILE]" \
       "  (1 <= N <= 32 silos)" >&2
  exit 2
}
n=""
postgres=""      # "yes" with --postgres
conninfo=""      # its CONNINFO, when given
tls_dir=""       # --tls=DIR
tls_ca=""        # --tls_ca, --tls_cert, --tls_key: the gateways' client
tls_cert=""      # CA, certificate and key
tls_key=""
token_file=""    # --token_file
for arg in "$@"; do
  case "$arg" in
    --postgres) postgres=yes ;;
    --postgres=*) postgres=yes; conninfo=${arg#--postgres=}
                  [ -n "$conninfo" ] || usage ;;
    --tls=*|--tls_ca=*|--tls_cert=*|--tls_key=*|--token_file=*)
      [ -n "${arg#*=}" ] || usage "${arg%%=*} needs a value"
      case "$arg" in
        --tls=*) tls_dir=${arg#*=} ;;
        --tls_ca=*) tls_ca=${arg#*=} ;;
        --tls_cert=*) tls_cert=${arg#*=} ;;
        --tls_key=*) tls_key=${arg#*=} ;;
        --token_file=*) token_file=${arg#*=} ;;
      esac ;;
    *) [ -z "$n" ] || usage; n=$arg ;;
  esac
done
n=${n:-3}
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 32 ]; then
  usage
fi
if [ -n "$tls_ca$tls_cert$tls_key" ] \
    && { [ -z "$tls_ca" ] || [ -z "$tls_cert" ] || [ -z "$tls_key" ]; }; then
  usage "--tls_ca, --tls_cert and --tls_key go together (the gateways'" \
        "client CA, certificate and key)"
fi
if [ -n "$tls_ca$token_file" ] && [ -z "$tls_dir" ]; then
  # The silo ports take grain calls from silos with the caller's identity:
  # while the gateways authenticate clients, they must authenticate silos.
  usage "--token_file and --tls_ca need --tls=DIR (mutual TLS between the" \
        "silos, whose ports would otherwise take calls as anyone)"
fi
bin=${GRANARY_BIN:-build/bin}
if [ ! -x "$bin/granary-silo" ]; then
  echo "local-cluster.sh: no $bin/granary-silo (build first, or set GRANARY_BIN)" >&2
  exit 2
fi
dir=${GRANARY_CLUSTER_DIR:-./granary-cluster}
mkdir -p "$dir"
work=$(mktemp -d)
pids=()
here=$(cd "$(dirname "$0")" && pwd)
started_postgres=""  # yes once the throwaway server is up
silo_security=()     # the silos' TLS and token flags
client_flags=()      # what clients need to reach them

stop_all() {
  # A second signal must not cut the stop short (it would leave silos and
  # the throwaway server running): signals are ignored from here on.
  trap '' INT TERM
  trap - EXIT
  # A dev cluster's primary last: the others leave through its table, so it
  # gets its SIGTERM once they are gone (equal silos all get theirs at
  # once). A graceful stop takes seconds; a silo that has not gone after
  # 30 s (one stuck before it handles signals) is killed.
  local deadline=$((SECONDS + 30))
  local i first=1
  [ -z "$postgres" ] || first=0
  for ((i = ${#pids[@]} - 1; i >= first; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
  done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    local pid=${pids[$i]}
    if [ "$i" -eq 0 ] && [ "$first" -eq 1 ]; then
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 30))
    fi
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ -z "$started_postgres" ] || pg_server_stop
  rm -rf "$work"
}
trap 'stop_all; exit 0' INT TERM
trap stop_all EXIT

# start I [FLAGS...]: starts silo I and sets `ready` to its READY line.
# (Not run in a subshell: the silo must be this shell's child.)
start() {
  local i=$1; shift
  mkfifo "$work/ready-$i"
  # Its own session: Ctrl-C reaches only this script, which stops every
  # silo with one SIGTERM (a second signal would make a silo exit at once).
  # shellcheck disable=SC2086
  setsid "$bin/granary-silo" --gateway=127.0.0.1:0 --silo=127.0.0.1:0 \
      --http=127.0.0.1:0 --data_dir="$dir/silo-$i" --log_level=warning --examples --bench_grains \
      "${silo_security[@]}" ${GRANARY_SILO_FLAGS:-} "$@" \
      > "$work/ready-$i" 2> "$dir/silo-$i.log" &
  pids+=($!)
  local line=""
  if ! read -r -t 60 line < "$work/ready-$i" || [[ "$line" != READY* ]]; then
    echo "local-cluster.sh: silo $i did not start; its log ($dir/silo-$i.log):" >&2
    tail -n 20 "$dir/silo-$i.log" >&2
    exit 1
  fi
  ready=$line
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $2"; }

# Starts the throwaway server (scripts/throwaway-postgres.sh, in the
# cluster's folder when the server's user can reach it); sets conninfo.
start_postgres() {
  # shellcheck source=scripts/throwaway-postgres.sh
  source "$here/../scripts/throwaway-postgres.sh"
  pg_server_start "$dir/postgres" > /dev/null \
    || { echo "local-cluster.sh: could not start PostgreSQL" >&2; exit 1; }
  conninfo=$(cat "$pg_conninfo_file")
  local fate="stopped with the cluster"
  [ -z "$pg_dir_is_ours" ] || fate="stopped and removed with the cluster"
  echo "PostgreSQL: 127.0.0.1:$pg_port (data and log in $pg_dir; $fate)"
}

# Sets silo_security and client_flags from --tls, --tls_ca/--tls_cert/
# --tls_key and --token_file, making DIR's certificates first if need be.
security() {
  if [ -n "$tls_dir" ] && [ ! -e "$tls_dir/ca.pem" ]; then
    "$here/../scripts/dev-certs.sh" "$tls_dir" > /dev/null \
      || { echo "local-cluster.sh: scripts/dev-certs.sh $tls_dir failed" >&2; exit 1; }
    echo "TLS: development certificates made in $tls_dir (scripts/dev-certs.sh)"
  fi
  local file needed=("$tls_ca" "$tls_cert" "$tls_key")
  [ -z "$tls_dir" ] \
    || needed+=("$tls_dir"/{gateway.pem,gateway.key,cluster-ca.pem,silo.pem,silo.key})
  for file in "${needed[@]}"; do
    [ -z "$file" ] || [ -r "$file" ] || usage "cannot read $file"
  done
  if [ -n "$tls_cert" ]; then
    silo_security+=(--tls_cert="$tls_cert" --tls_key="$tls_key" --tls_client_ca="$tls_ca")
    client_flags+=(--tls_ca="$tls_ca")
    if [ -n "$tls_dir" ] && [ "$tls_ca" -ef "$tls_dir/ca.pem" ]; then
      client_flags+=(--tls_cert="$tls_dir/client.pem" --tls_key="$tls_dir/client.key")
    else
      client_flags+=(--tls_cert=CLIENT.pem --tls_key=CLIENT.key)
    fi
  elif [ -n "$tls_dir" ]; then
    silo_security+=(--tls_cert="$tls_dir/gateway.pem" --tls_key="$tls_dir/gateway.key")
    client_flags+=(--tls_ca="$tls_dir/ca.pem")
  fi
  if [ -n "$tls_dir" ]; then
    silo_security+=(--cluster_ca="$tls_dir/cluster-ca.pem"
                    --cluster_tls_cert="$tls_dir/silo.pem"
                    --cluster_tls_key="$tls_dir/silo.key")
  fi
  if [ -n "$token_file" ]; then
    # The token without surrounding whitespace, as clients send it.
    local token
    token=$(cat "$token_file" 2>/dev/null) || usage "cannot read $token_file"
    token=${token#"${token%%[![:space:]]*}"}
    token=${token%"${token##*[![:space:]]}"}
    if [ "${#token}" -lt 16 ] || [[ "$token" =~ [[:space:][:cntrl:]] ]]; then
      usage "$token_file must hold one token of at least 16 characters"
    fi
    (umask 077; printf '# NAME TOKEN (local-cluster.sh --token_file)\ndev-client %s\n' \
       "$token" > "$dir/auth-tokens")
    silo_security+=(--auth_tokens="$dir/auth-tokens")
    client_flags+=(--token_file="$token_file")
  fi
}

security
ready=""
lines=()
if [ -n "$postgres" ]; then
  if [ -z "$conninfo" ]; then
    started_postgres=yes
    start_postgres
  fi
  # The silos and the migration read the connection string from a file
  # only this user can read: it may hold a password.
  (umask 077; printf '%s\n' "$conninfo" > "$dir/postgres.conninfo")
  "$bin/granary" db migrate --postgres_file="$dir/postgres.conninfo" \
    || { echo "local-cluster.sh: granary db migrate failed" >&2; exit 1; }
  for ((i = 0; i < n; i++)); do
    start "$i" --cluster=postgres --postgres_file="$dir/postgres.conninfo" \
        --cluster_id=local
    lines+=("$ready")
  done
else
  start 0 --cluster=dev
  primary=$(field silo "$ready")
  lines=("$ready")
  for ((i = 1; i < n; i++)); do
    start "$i" --cluster=dev --primary="$primary"
    lines+=("$ready")
  done
fi

gateways=()
for line in "${lines[@]}"; do gateways+=("$(field gateway "$line")"); done
(IFS=,; echo "GATEWAYS=${gateways[*]}")
[ ${#client_flags[@]} -eq 0 ] || echo "CLIENT_FLAGS=${client_flags[*]}"
for i in "${!lines[@]}"; do
  echo "silo $i: ${lines[$i]#READY } log=$dir/silo-$i.log"
done
flags=${client_flags[*]:+${client_flags[*]} }
echo "granary: $bin/granary --gateway=${gateways[0]} ${flags}cluster"
echo "Ctrl-C stops the cluster."

# Runs until a signal, or until every silo has exited.
wait
