#!/usr/bin/env bash
# The 20-round tool loop against `keel mock`: wall time, launch to first request, peak RSS and
# per-round harness overhead. Usage: bench/tool_loop.sh [ROUNDS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 bench/tool_loop.py "$(pwd)/target/release/keel" "${1:-20}" "${2:-5}"
