#!/usr/bin/env bash
# A long session's costs: resuming a 10 000-item session (open, settle, load and decode the
# history, project the next request) against a plain SQLite SELECT of the same rows, and one
# compaction commit. Each measurement is its own process (peak RSS per mode), medians of RUNS.
# Usage: bench/long_session.sh [ITEMS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
items="${1:-10000}"
runs="${2:-5}"
cargo build --release --quiet -p keel-agent --example long_session
bin="$(pwd)/target/release/examples/long_session"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" prepare "$dir/keel.db" "$items" >/dev/null
for _ in $(seq "$runs"); do
  "$bin" select "$dir/keel.db"
  "$bin" resume "$dir/keel.db"
  cp "$dir/keel.db" "$dir/compact.db"
  rm -f "$dir/compact.db-wal" "$dir/compact.db-shm"
  "$bin" compact "$dir/compact.db"
done | python3 bench/long_session.py "$items"
