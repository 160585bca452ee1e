#!/usr/bin/env bash
# Launch to first request: `keel run` (fresh KEEL_HOME and used) against `curl` sending one
# request to the same local server, whole processes, measured in one run; plus the cold start
# of `keel --version` against /bin/true, and keel's own breakdown of its start-up.
# Usage: bench/startup.sh [RUNS]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p keel-cli
command -v curl >/dev/null || { echo "bench/startup.sh needs curl" >&2; exit 1; }
exec python3 bench/startup.py "$(pwd)/target/release/keel" "${1:-60}"
