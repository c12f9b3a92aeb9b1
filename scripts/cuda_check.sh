#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the GPU tests (preset "cuda", sm_80 + sm_90),
# runs them, then runs each under compute-sanitizer's memcheck and racecheck.
# Prints the device and a one-line verdict per test; full logs go to $LOG_DIR
# (default build/cuda/check-logs). Exit status: non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
LOG_DIR=${LOG_DIR:-build/cuda/check-logs}
mkdir -p "$LOG_DIR"
jobs=$(nproc)

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOG_DIR/device.txt"
date -u +"%Y-%m-%dT%H:%M:%SZ" | tee -a "$LOG_DIR/device.txt"

cmake --preset cuda >"$LOG_DIR/configure.log" 2>&1 || { echo "configure failed"; exit 1; }
targets=$(ls tests/cuda/test_*.cu | sed -E 's|tests/cuda/test_(.*)\.cu|cuda_test_\1|')
# shellcheck disable=SC2086
cmake --build --preset cuda -j "$jobs" --target $targets >"$LOG_DIR/build.log" 2>&1 || { echo "build failed"; exit 1; }

status=0
for t in $targets; do
    bin=build/cuda/tests/$t
    if "$bin" >"$LOG_DIR/$t.log" 2>&1; then r=pass; else r="FAIL($?)"; status=1; fi
    m=skipped; rc=skipped
    if command -v compute-sanitizer >/dev/null 2>&1; then
        if compute-sanitizer --tool memcheck --error-exitcode 9 "$bin" >"$LOG_DIR/$t.memcheck.log" 2>&1; then
            m=clean; else m=ERRORS; status=1; fi
        if compute-sanitizer --tool racecheck --error-exitcode 9 "$bin" >"$LOG_DIR/$t.racecheck.log" 2>&1; then
            rc=clean; else rc=ERRORS; status=1; fi
    fi
    printf '%-28s run %-8s memcheck %-8s racecheck %s\n' "$t" "$r" "$m" "$rc"
done
exit $status
