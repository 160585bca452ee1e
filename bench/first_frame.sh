#!/usr/bin/env bash
# Launch to the first frame of `keel`'s live TUI under a pseudo-terminal, against a shell's
# word under the same terminal. Usage: bench/first_frame.sh [RUNS] (builds the release binary).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p keel-cli
exec python3 bench/first_frame.py "$(pwd)/target/release/keel" "${1:-30}"
