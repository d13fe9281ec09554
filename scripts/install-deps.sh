#!/usr/bin/env bash
# Installs the Debian 12 packages Granary's build and tests need.
# Idempotent: when every package is already installed it does nothing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libprotoc-dev
  libabsl-dev librocksdb-dev civetweb libcivetweb-dev
  openssl libssl-dev
  postgresql libpq-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libjemalloc-dev
  libcaf-dev erlang-base
  clang libclang-rt-14-dev clang-format
  systemd file python3-yaml
  python3-grpcio python3-protobuf python3-matplotlib python3-prometheus-client
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
