#!/usr/bin/env bash
# tests/make-test-certs.sh DIR: the certificates the TLS tests use.
#
#   DIR/a, DIR/b   two independent sets from scripts/dev-certs.sh (see there
#                  for the files): b's certificates come from CAs that a's
#                  do not trust, so DIR/b/silo.pem is "a silo certificate from
#                  another cluster CA" and DIR/b/client.pem "a client
#                  certificate from another CA".
#   DIR/a/silo-127.0.0.2.pem, .key, DIR/a/silo-127.0.0.3.pem, .key
#                  per-host silo certificates (scripts/dev-certs.sh
#                  --silo=HOST) from DIR/a/cluster-ca, each naming only its
#                  own host (IP:127.0.0.2, IP:127.0.0.3), for silos that run
#                  on distinct loopback addresses and may act only for their
#                  own.
#   DIR/a/silo-127.0.0.1-1.pem, .key
#                  the certificate of the one silo endpoint 127.0.0.1:1
#                  (scripts/dev-certs.sh --silo=127.0.0.1:1): IP:127.0.0.1
#                  and URI:granary-silo://127.0.0.1:1, so it acts for that
#                  endpoint and no other silo on 127.0.0.1.
#   DIR/a/expired-client.pem, .key
#                  a client certificate (CN=dev-client, clientAuth) from
#                  DIR/a/ca whose validity ended in the past
#                  (2020-01-01 to 2020-01-02).
#   DIR/a/expired-silo.pem, .key
#                  the same for a silo certificate (CN=granary-silo,
#                  serverAuth and clientAuth, the SANs localhost, 127.0.0.1,
#                  ::1) from DIR/a/cluster-ca.
#
# The expired certificates differ from DIR/a/client.pem and DIR/a/silo.pem in
# their dates only, so a test that sees one refused sees expiry refused.
# Re-running keeps the CAs and issues new leaf certificates. Prints nothing on
# success; exits non-zero with a message on any failure. Needs only openssl
# (OpenSSL 3.0, whose `x509` command cannot set a start date, hence `openssl
# ca` below).
set -euo pipefail

die() {
  echo "make-test-certs.sh: $*" >&2
  exit 1
}

if [[ $# -ne 1 || -z $1 || $1 == -* ]]; then
  echo "usage: tests/make-test-certs.sh DIR" >&2
  exit 2
fi
dir=$1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dev_certs=$here/../scripts/dev-certs.sh
[[ -f $dev_certs ]] || die "cannot find $dev_certs"

mkdir -p -- "$dir" || die "cannot create $dir"
bash "$dev_certs" --silo=127.0.0.2 --silo=127.0.0.3 --silo=127.0.0.1:1 "$dir/a" \
  >/dev/null ||
  die "scripts/dev-certs.sh --silo=127.0.0.2 --silo=127.0.0.3 --silo=127.0.0.1:1 $dir/a failed"
bash "$dev_certs" "$dir/b" >/dev/null ||
  die "scripts/dev-certs.sh $dir/b failed"

work=$(mktemp -d "${TMPDIR:-/tmp}/make-test-certs.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# A minimal `openssl ca` set-up in $work: an empty database, random serials,
# any subject with a CN, and the extensions of the two certificates.
: >"$work/index.txt"
cat >"$work/openssl.cnf" <<EOF
[ca]
default_ca = test_ca
[test_ca]
dir = $work
database = \$dir/index.txt
new_certs_dir = \$dir
rand_serial = yes
default_md = sha256
policy = any_cn
unique_subject = no
copy_extensions = none
[any_cn]
commonName = supplied
[req]
distinguished_name = req_dn
prompt = no
[req_dn]
CN = unused
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
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF

# expired NAME CN EXTENSIONS CA: writes DIR/a/NAME.pem and NAME.key, issued
# by DIR/a/CA and valid from 2020-01-01 to 2020-01-02 only.
expired() {
  local name=$1 cn=$2 ext=$3 ca=$4 out=$dir/a
  (umask 077 && openssl genpkey -algorithm EC \
    -pkeyopt ec_paramgen_curve:P-256 -pkeyopt ec_param_enc:named_curve \
    -out "$work/$name.key") 2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot make a key for $name.pem"; }
  openssl req -new -config "$work/openssl.cnf" -key "$work/$name.key" \
    -subj "/CN=$cn" -out "$work/$name.csr" 2>"$work/err" ||
    { cat "$work/err" >&2; die "cannot make a request for $name.pem"; }
  openssl ca -batch -notext -config "$work/openssl.cnf" \
    -cert "$out/$ca.pem" -keyfile "$out/$ca.key" \
    -startdate 20200101000000Z -enddate 20200102000000Z \
    -extensions "$ext" -in "$work/$name.csr" -out "$work/$name.pem" \
    2>"$work/err" >/dev/null ||
    { cat "$work/err" >&2; die "cannot sign $name.pem"; }
  chmod 0644 "$work/$name.pem"
  # Copied in, then renamed, so each file appears whole.
  cp -- "$work/$name.key" "$out/.$name.key.new"
  chmod 0600 "$out/.$name.key.new"
  mv -f -- "$out/.$name.key.new" "$out/$name.key"
  cp -- "$work/$name.pem" "$out/.$name.pem.new"
  mv -f -- "$out/.$name.pem.new" "$out/$name.pem"
}

expired expired-client dev-client client_ext ca
expired expired-silo granary-silo silo_ext cluster-ca
