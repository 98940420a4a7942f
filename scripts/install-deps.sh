#!/usr/bin/env bash
# Installs what gpumemprof needs to build and test, from Debian's packages. Idempotent: a package
# already installed is skipped, and apt is not touched when nothing is missing.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --browser  also chromium and node's speedscope and d3 (viewer tests)
set -euo pipefail
# python3-torch (CPU build, about 1 min): the `run --layers` hooks are tested on a real nn.Module
# python3-numba (test-only): a Debian CUDA client run unmodified on the simulator (simcuda_agent_numba)
# python3-pytest, python3-pip, python3-setuptools (test-only): the Python package's pytest plugin and
# its install without a download; python3-distributed (test-only): the Dask fleet on a LocalCluster
pkgs=(build-essential cmake pkg-config libzstd-dev zstd libdwarf-dev libelf-dev libcmocka-dev
      libunwind8 libsqlite3-dev clang clang-format libclang-rt-14-dev python3 python3-torch file
      llvm zlib1g-dev libncurses-dev tmux python3-dev python3-numba
      python3-pytest python3-pip python3-setuptools python3-distributed)
browser=0
if [[ "${1:-}" == "--browser" ]]; then
  browser=1
  pkgs+=(chromium)
  # node and npm by command: a nodejs from elsewhere (NodeSource) ships npm and conflicts with
  # Debian's npm package
  command -v node >/dev/null || pkgs+=(nodejs)
  command -v npm >/dev/null || pkgs+=(npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The speedscope viewer for tests/convert: the npm package, pinned by its package-lock.json, in a
# project-local node_modules (not committed).
if ((browser)); then
  viewer="$(dirname "$0")/../tests/convert/viewer"
  want=$(sed -n 's/.*"speedscope": *"\([0-9.]*\)".*/\1/p' "$viewer/package.json" | head -n1)
  have=$(sed -n 's/^ *"version": *"\([0-9.]*\)".*/\1/p' \
    "$viewer/node_modules/speedscope/package.json" 2>/dev/null | head -n1 || true)
  if [[ -n "$want" && "$have" == "$want" ]]; then
    echo "install-deps: speedscope $have present"
  else
    echo "install-deps: npm ci (speedscope $want) in tests/convert/viewer"
    (cd "$viewer" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # The d3 modules PyTorch's memory_viz imports from a CDN, pinned the same way, served locally
  # by tests/convert/memviz_viewer.py (MemoryViz.js itself comes from GMP_MEMVIZ_JS).
  memviz="$(dirname "$0")/../tests/convert/memviz"
  want=$(sed -n 's/.*"d3": *"\([0-9.]*\)".*/\1/p' "$memviz/package.json" | head -n1)
  have=$(sed -n 's/^ *"version": *"\([0-9.]*\)".*/\1/p' \
    "$memviz/node_modules/d3/package.json" 2>/dev/null | head -n1 || true)
  if [[ -n "$want" && "$have" == "$want" && -d "$memviz/node_modules/d3-scale" ]]; then
    echo "install-deps: memory_viz's d3 $have present"
  else
    echo "install-deps: npm ci (d3 $want and d3-axis/-scale/-zoom/-brush) in tests/convert/memviz"
    (cd "$memviz" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # Outside checkers of convert's outputs, pinned the same way: pprof-format (decodes --pprof
  # files), playwright-core (drives Debian's chromium for --html-view; downloads no browser),
  # and two Parquet readers for --parquet: DuckDB (@duckdb/node-api, with its prebuilt
  # @duckdb/node-bindings-linux-x64) and hyparquet (pure JavaScript, hyparquet-compressors for
  # zstd).
  nodedeps="$(dirname "$0")/../tests/convert/nodedeps"
  ok=1
  for m in pprof-format playwright-core @duckdb/node-api hyparquet hyparquet-compressors; do
    want=$(sed -n 's|.*"'$m'": *"\([0-9A-Za-z.-]*\)".*|\1|p' "$nodedeps/package.json" | head -n1)
    have=$(sed -n 's/^ *"version": *"\([0-9A-Za-z.-]*\)".*/\1/p' \
      "$nodedeps/node_modules/$m/package.json" 2>/dev/null | head -n1 || true)
    [[ -n "$want" && "$have" == "$want" ]] || ok=0
  done
  if ((ok)); then
    echo "install-deps: pprof-format, playwright-core, @duckdb/node-api and hyparquet present"
  else
    echo "install-deps: npm ci (pprof-format, playwright-core, @duckdb/node-api, hyparquet) in" \
      "tests/convert/nodedeps"
    (cd "$nodedeps" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
