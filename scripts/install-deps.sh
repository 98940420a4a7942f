#!/usr/bin/env bash
# Installs what gpumemprof needs to build and test, from Debian's packages. Idempotent: a package
# already installed is skipped, and apt is not touched when nothing is missing.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --browser  also chromium and node's speedscope (viewer tests)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libzstd-dev zstd libdwarf-dev libelf-dev libcmocka-dev
      libunwind8 libsqlite3-dev clang libclang-rt-14-dev python3 file)
if [[ "${1:-}" == "--browser" ]]; then
  pkgs+=(chromium nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
