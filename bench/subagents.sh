#!/usr/bin/env bash
# Four concurrent `explore` subagents vs the same rounds in one agent, against `keel mock` with
# a per-request delay: wall ratio and keel's peak RSS. Usage: bench/subagents.sh [ROUNDS] [RUNS] [DELAY_MS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 bench/subagents.py "$(pwd)/target/release/keel" "${1:-10}" "${2:-5}" "${3:-50}"
