#!/usr/bin/env bash
# Cold-start time of `keel --version`, against `/bin/true` measured in the same run.
# Usage: bench/startup.sh [RUNS]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
python3 - "${1:-200}" <<'PY'
import subprocess, sys, time
runs = int(sys.argv[1])
def measure(cmd):
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return times[0], times[len(times) // 2], times[int(len(times) * 0.9)]
keel = measure(["target/release/keel", "--version"])
true = measure(["/bin/true"])
print(f"keel --version: min {keel[0]:.2f} ms, median {keel[1]:.2f} ms, p90 {keel[2]:.2f} ms")
print(f"/bin/true:      min {true[0]:.2f} ms, median {true[1]:.2f} ms, p90 {true[2]:.2f} ms")
print(f"ratio (median): {keel[1] / true[1]:.1f}x")
PY
