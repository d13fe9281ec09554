#!/usr/bin/env bash
# scripts/dev-certs.sh: development certificates for a TLS Granary deployment.
#
#   scripts/dev-certs.sh [--silo=HOST...] DIR [HOST...]
#
# Makes DIR (if missing) and writes into it, with EC P-256 keys (PEM, private
# keys and the token files mode 0600):
#
#   ca.pem, ca.key                 the client-facing CA ("Granary development
#                                  gateway CA", 3650 days): it signs the
#                                  gateway's certificate, which clients check
#                                  with --tls_ca, and the client certificates,
#                                  which the silo checks with --tls_client_ca.
#   gateway.pem, gateway.key       the silo's gateway (client-facing) server
#                                  certificate, CN=granary-gateway, serverAuth.
#   client.pem, client.key         a client certificate, CN=dev-client,
#                                  clientAuth (mutual TLS to the gateway).
#   cluster-ca.pem, cluster-ca.key a separate CA for silo-to-silo mutual TLS
#                                  ("Granary development cluster CA").
#   silo.pem, silo.key             a silo certificate, CN=granary-silo,
#                                  serverAuth and clientAuth (a silo both
#                                  serves and calls the others with it), for
#                                  development on one machine: it names
#                                  localhost and every HOST (below), so each
#                                  silo holding it may act for all of them.
#   silo-HOST.pem, silo-HOST.key   for each --silo=HOST, a certificate of the
#                                  cluster CA for the silo on HOST only:
#                                  CN=granary-silo-HOST, serverAuth and
#                                  clientAuth, its one subject alternative
#                                  name HOST (IP:... or DNS:...). A silo acts
#                                  only for the hosts its certificate names,
#                                  and must be the one silo holding it. In the
#                                  file name every character of HOST other
#                                  than [A-Za-z0-9._-] becomes "_"
#                                  (silo-10.0.0.5.pem, silo-__1.pem for ::1).
#   silo-HOST-PORT.pem, .key       for each --silo=HOST:PORT, the same but
#                                  also naming the one silo endpoint: a URI
#                                  SAN granary-silo://HOST:PORT. A silo
#                                  whose certificate has such a name acts
#                                  for that endpoint alone, even beside
#                                  other silos on HOST.
#   token                          a random bearer token (openssl rand -hex 32),
#                                  for a client's --token_file.
#   tokens                         the silo's --auth_tokens file: lines of
#                                  "NAME TOKEN"; here "dev-client <token>".
#
# Leaf certificates last 825 days. Those of the gateway and silo.pem name
# DNS:localhost, IP:127.0.0.1, IP:::1 and each HOST (an IP address if HOST
# parses as IPv4 or IPv6, else a DNS name; [::1] style brackets allowed). A
# --silo=HOST takes the same forms, but not a wildcard. Options may come
# anywhere before a "--"; a bad HOST, bad option or missing DIR exits 2 with
# the usage before anything is written.
#
# Re-running reuses the CAs (and keeps token and tokens) and issues new leaf
# keys and certificates, with new random serials, from the same CAs: that is
# how one rotates leaf certificates in development. Each leaf file is written
# to a temporary file in DIR and renamed into place, so a process watching it
# never reads a half-written file; the key is renamed before its certificate,
# so a watcher that reloads when the certificate changes finds the new pair
# (between the two renames, the old certificate sits beside the new key).
# To start over with new CAs, remove DIR.
#
# Needs only openssl (OpenSSL 3.0, as in Debian 12). Prints the files and the
# granary-silo and client flags that use them.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/dev-certs.sh [--silo=HOST...] DIR [HOST...]

Writes development TLS certificates, keys and a bearer token into DIR
(created if missing): ca.pem/ca.key, gateway.pem/gateway.key,
client.pem/client.key, cluster-ca.pem/cluster-ca.key, silo.pem/silo.key,
token, tokens. The gateway certificate and silo.pem name localhost,
127.0.0.1, ::1 and each HOST (an IP address or a DNS name); silo.pem is
for silos on one machine.

  --silo=HOST   (repeatable) also issue silo-HOST.pem/silo-HOST.key from
                the cluster CA, naming HOST only (an IP address or a DNS
                name): the certificate of the silo on HOST when silos run
                on several hosts. Characters of HOST other than
                [A-Za-z0-9._-] become "_" in the file name (::1:
                silo-__1.pem).
  --silo=HOST:PORT
                (repeatable) the same for the one silo at HOST:PORT
                ([IPV6]:PORT), with the URI name granary-silo://HOST:PORT
                as well: silo-HOST-PORT.pem/.key. Its holder acts for that
                silo endpoint only.

Re-running keeps the CAs and the token and issues new leaf certificates.
EOF
}

die() {
  echo "dev-certs.sh: $*" >&2
  exit 1
}

# bad_usage MESSAGE: the usage error MESSAGE, then the usage; exits 2.
bad_usage() {
  echo "dev-certs.sh: $*" >&2
  usage >&2
  exit 2
}

dir=""
hosts=()
silo_args=()
end_of_options=""
for arg in "$@"; do
  if [[ -z $end_of_options && $arg == -- ]]; then
    end_of_options=1
  elif [[ -z $end_of_options && ($arg == -h || $arg == --help) ]]; then
    usage
    exit 0
  elif [[ -z $end_of_options && $arg == --silo=* ]]; then
    silo_args+=("${arg#--silo=}")
  elif [[ -z $end_of_options && $arg == --silo ]]; then
    bad_usage "--silo needs a host: --silo=HOST"
  elif [[ -z $end_of_options && $arg == -* ]]; then
    bad_usage "unknown option: $arg"
  elif [[ -z $dir ]]; then
    dir=$arg
  else
    hosts+=("$arg")
  fi
done
if [[ -z $dir ]]; then
  bad_usage "no DIR given: say where to write the certificates"
fi

# is_ipv4 ADDRESS: whether ADDRESS is a dotted-quad IPv4 address.
is_ipv4() {
  local octet o1 o2 o3 o4
  [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
  IFS=. read -r o1 o2 o3 o4 <<<"$1"
  for octet in "$o1" "$o2" "$o3" "$o4"; do
    ((${#octet} <= 3 && 10#$octet <= 255)) || return 1
  done
}

# hex_groups PART: prints how many colon-separated groups of 1-4 hex digits
# PART (a side of an IPv6 "::", or a whole address) has; fails if it is
# anything else. An empty PART has none.
hex_groups() {
  local part=$1 group groups=()
  if [[ -z $part ]]; then
    echo 0
    return 0
  fi
  [[ $part != :* && $part != *: ]] || return 1
  IFS=: read -r -a groups <<<"$part"
  for group in "${groups[@]}"; do
    [[ $group =~ ^[0-9A-Fa-f]{1,4}$ ]] || return 1
  done
  echo "${#groups[@]}"
}

# is_ipv6 ADDRESS: whether ADDRESS is an IPv6 address (RFC 4291 text form,
# with at most one "::" and optionally a dotted-quad IPv4 last 32 bits).
is_ipv6() {
  local a=$1 head tail n m
  [[ $a == *:* ]] || return 1
  if [[ $a =~ ^(.*:)([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
    head=${BASH_REMATCH[1]}
    tail=${BASH_REMATCH[2]}
    is_ipv4 "$tail" || return 1
    a=${head}0:0 # the IPv4 part is two groups
  fi
  [[ $a =~ ^[0-9A-Fa-f:]+$ ]] || return 1
  if [[ $a == *::* ]]; then
    head=${a%%::*}
    tail=${a#*::}
    [[ $tail != *::* ]] || return 1
    n=$(hex_groups "$head") || return 1
    m=$(hex_groups "$tail") || return 1
    ((n + m <= 7))
  else
    n=$(hex_groups "$a") || return 1
    ((n == 8))
  fi
}

# parse_host HOST WHAT: sets host (HOST without [] brackets) and host_san
# (IP:... or DNS:...), or exits 2 with a message naming WHAT and the usage.
host=""
host_san=""
parse_host() {
  host=$1
  local what=$2
  # [::1] style brackets, as in a URL, are allowed.
  if [[ $host == \[*\] ]]; then
    host=${host#[}
    host=${host%]}
  fi
  if [[ -z $host ]]; then
    bad_usage "$what: no host given"
  elif is_ipv4 "$host" || is_ipv6 "$host"; then
    host_san="IP:$host"
  elif [[ $host =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    bad_usage "$what: not an IPv4 address: $host"
  elif [[ $host =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
    host_san="DNS:$host"
  elif [[ $host =~ ^(\[.*\]|[^:]*):[0-9]*$ ]]; then
    bad_usage "$what: give a host without a port: $host"
  elif [[ $host == *:* ]]; then
    bad_usage "$what: not an IPv6 address: $host"
  else
    bad_usage "$what: not a host name or IP address: $host"
  fi
}

# The subject alternative names of the gateway certificate and silo.pem.
sans=(DNS:localhost IP:127.0.0.1 IP:::1)
add_san() {
  local san=$1 have
  for have in "${sans[@]}"; do
    [[ $have == "$san" ]] && return 0
  done
  sans+=("$san")
}
for arg in "${hosts[@]}"; do
  parse_host "$arg" "HOST $arg"
  add_san "$host_san"
done
san_list=$(IFS=,; echo "${sans[*]}")

# The --silo hosts, each once: silo_hosts[i] is the host (or HOST:PORT),
# silo_sans[i] its subject alternative names and silo_names[i] the files' name (without
# .pem or .key).
silo_hosts=()
silo_sans=()
silo_names=()
for arg in "${silo_args[@]}"; do
  port=""
  if [[ $arg =~ ^(\[[^]]*\]|[^:]*):([0-9]+)$ ]]; then
    port=${BASH_REMATCH[2]}
    ((10#$port >= 1 && 10#$port <= 65535)) ||
      bad_usage "--silo=$arg: port $port is not 1 to 65535"
    port=$((10#$port))
    parse_host "${BASH_REMATCH[1]}" "--silo=$arg"
  else
    parse_host "$arg" "--silo=$arg"
  fi
  [[ $host_san != DNS:\** ]] ||
    bad_usage "--silo=$arg: a silo's certificate names its one host, not a wildcard"
  name=silo-${host//[^A-Za-z0-9._-]/_}
  key=$host
  if [[ -n $port ]]; then
    name+=-$port
    if [[ $host == *:* ]]; then
      key="[$host]:$port"
    else
      key="$host:$port"
    fi
    host_san+=",URI:granary-silo://$key"
  fi
  duplicate=""
  for i in "${!silo_hosts[@]}"; do
    if [[ ${silo_hosts[i]} == "$key" ]]; then
      duplicate=1
    elif [[ ${silo_names[i]} == "$name" ]]; then
      bad_usage "--silo=${silo_hosts[i]} and --silo=$host would both write $name.pem"
    fi
  done
  [[ -n $duplicate ]] && continue
  silo_hosts+=("$key")
  silo_sans+=("$host_san")
  silo_names+=("$name")
done

# Scratch files that hold nothing secret (configuration, requests) go to a
# directory of our own; new keys and certificates go to temporary files in
# DIR, renamed into place when complete. Both go away on any exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/dev-certs.XXXXXX")
pending=()
cleanup() {
  rm -rf -- "$work"
  if ((${#pending[@]})); then
    rm -f -- "${pending[@]}"
  fi
}
trap cleanup EXIT

cat >"$work/openssl.cnf" <<EOF
[req]
distinguished_name = req_dn
prompt = no
[req_dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[gateway_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san_list
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[silo_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = $san_list
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
# silo_host_ext_I: silo_ext for --silo=silo_hosts[I], naming that host only.
for i in "${!silo_hosts[@]}"; do
  cat >>"$work/openssl.cnf" <<EOF
[silo_host_ext_$i]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = ${silo_sans[i]}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
done

# Whether openssl takes the names (it knows IPv6 syntax better than the
# checks above), before anything is written to DIR.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
  -out "$work/check.key" 2>"$work/err" ||
  { cat "$work/err" >&2; die "openssl cannot make a P-256 key"; }
# takes_names EXTENSIONS: whether openssl makes a certificate with them.
takes_names() {
  openssl req -x509 -new -config "$work/openssl.cnf" -extensions "$1" \
    -key "$work/check.key" -subj /CN=check -out /dev/null 2>"$work/err" && return 0
  grep -o 'value=.*' "$work/err" >&2 || cat "$work/err" >&2
  return 1
}
takes_names silo_ext ||
  bad_usage "openssl refuses the subject alternative names $san_list"
for i in "${!silo_hosts[@]}"; do
  takes_names "silo_host_ext_$i" ||
    bad_usage "--silo=${silo_hosts[i]}: openssl refuses the subject alternative name ${silo_sans[i]}"
done

mkdir -p -- "$dir" || die "cannot create $dir"
[[ -d $dir && -w $dir ]] || die "$dir is not a writable directory"

# new_temp NAME: prints a fresh temporary file in DIR (mode 0600) for NAME.
new_temp() {
  mktemp "$dir/.$1.XXXXXX"
}

# random_serial: a random positive 128-bit serial number.
random_serial() {
  local hex
  hex=$(openssl rand -hex 16)
  echo "0x$hex"
}

# new_key FILE: writes a new P-256 private key (PKCS#8 PEM) to FILE, which
# new_temp made with mode 0600.
new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
    -pkeyopt ec_param_enc:named_curve -out "$1" 2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot make a key"; }
}

# same_key CERT KEY: whether KEY is the private key of CERT.
same_key() {
  local a b
  a=$(openssl x509 -in "$1" -noout -pubkey 2>/dev/null) || return 1
  b=$(openssl pkey -in "$2" -pubout 2>/dev/null) || return 1
  [[ -n $a && $a == "$b" ]]
}

# make_ca NAME CN: makes NAME.pem and NAME.key, or keeps them when both exist.
make_ca() {
  local name=$1 cn=$2 key cert serial
  if [[ -e $dir/$name.pem || -e $dir/$name.key ]]; then
    [[ -f $dir/$name.pem && -f $dir/$name.key ]] ||
      die "$dir has only one of $name.pem and $name.key; remove it, or put back the other"
    same_key "$dir/$name.pem" "$dir/$name.key" ||
      die "$dir/$name.key is not the key of $dir/$name.pem"
    ca_status+="  $name.pem, $name.key: kept"$'\n'
    return 0
  fi
  key=$(new_temp "$name.key")
  pending+=("$key")
  cert=$(new_temp "$name.pem")
  pending+=("$cert")
  new_key "$key"
  serial=$(random_serial)
  openssl req -x509 -new -config "$work/openssl.cnf" -extensions ca_ext \
    -key "$key" -subj "/CN=$cn" -days 3650 -sha256 \
    -set_serial "$serial" -out "$cert" 2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot make $name.pem"; }
  chmod 0644 "$cert"
  mv -f -- "$key" "$dir/$name.key"
  mv -f -- "$cert" "$dir/$name.pem"
  ca_status+="  $name.pem, $name.key: new"$'\n'
}

# make_leaf NAME CN EXTENSIONS CA: issues NAME.pem (with a new NAME.key) from
# CA.pem and CA.key, replacing both files atomically.
make_leaf() {
  local name=$1 cn=$2 ext=$3 ca=$4 key cert serial
  key=$(new_temp "$name.key")
  pending+=("$key")
  cert=$(new_temp "$name.pem")
  pending+=("$cert")
  new_key "$key"
  openssl req -new -config "$work/openssl.cnf" -key "$key" -subj "/CN=$cn" \
    -sha256 -out "$work/$name.csr" 2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot make a request for $name.pem"; }
  serial=$(random_serial)
  openssl x509 -req -in "$work/$name.csr" -CA "$dir/$ca.pem" \
    -CAkey "$dir/$ca.key" -set_serial "$serial" -days 825 -sha256 \
    -extfile "$work/openssl.cnf" -extensions "$ext" -out "$cert" \
    2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot sign $name.pem"; }
  chmod 0644 "$cert"
  mv -f -- "$key" "$dir/$name.key"
  mv -f -- "$cert" "$dir/$name.pem"
}

ca_status=""
make_ca ca "Granary development gateway CA"
make_ca cluster-ca "Granary development cluster CA"
make_leaf gateway granary-gateway gateway_ext ca
make_leaf client dev-client client_ext ca
make_leaf silo granary-silo silo_ext cluster-ca
silo_status=""
silo_flags=""
for i in "${!silo_hosts[@]}"; do
  name=${silo_names[i]}
  # A subject's CN holds at most 64 characters; the names that count are
  # the subject alternative names.
  cn="granary-silo-${silo_hosts[i]}"
  make_leaf "$name" "${cn:0:64}" "silo_host_ext_$i" cluster-ca
  silo_status+="  $name.pem, $name.key: new (CN=${cn:0:64}; ${silo_sans[i]})"$'\n'
  silo_flags+="  on ${silo_hosts[i]}, instead: --cluster_tls_cert=$dir/$name.pem --cluster_tls_key=$dir/$name.key"$'\n'
done

# The bearer token and the tokens file, kept when they exist.
token_status="kept"
if [[ ! -e $dir/token ]]; then
  tmp=$(new_temp token)
  pending+=("$tmp")
  openssl rand -hex 32 >"$tmp"
  mv -f -- "$tmp" "$dir/token"
  token_status="new"
fi
token=$(tr -d '[:space:]' <"$dir/token")
[[ -n $token ]] || die "$dir/token is empty; remove it to make a new one"
tokens_status="kept"
if [[ ! -e $dir/tokens ]]; then
  tmp=$(new_temp tokens)
  pending+=("$tmp")
  printf '# NAME TOKEN, one per line\ndev-client %s\n' "$token" >"$tmp"
  mv -f -- "$tmp" "$dir/tokens"
  tokens_status="new"
elif ! grep -qE "^[^#[:space:]]+[[:space:]]+${token}[[:space:]]*$" "$dir/tokens"; then
  echo "dev-certs.sh: warning: $dir/tokens does not list the token in $dir/token" >&2
fi

cat <<EOF
Development certificates in $dir:
${ca_status}  gateway.pem, gateway.key: new (CN=granary-gateway; $san_list)
  client.pem, client.key: new (CN=dev-client)
  silo.pem, silo.key: new (CN=granary-silo; $san_list)
${silo_status}  token: $token_status; tokens: $tokens_status

granary-silo:
  --tls_cert=$dir/gateway.pem --tls_key=$dir/gateway.key
  [--tls_client_ca=$dir/ca.pem]  (require client certificates)
  [--auth_tokens=$dir/tokens]    (require a bearer token)
  --cluster_ca=$dir/cluster-ca.pem --cluster_tls_cert=$dir/silo.pem --cluster_tls_key=$dir/silo.key
${silo_flags}
clients (granary, the client SDK):
  --tls_ca=$dir/ca.pem --tls_cert=$dir/client.pem --tls_key=$dir/client.key --token_file=$dir/token
EOF
