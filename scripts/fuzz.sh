#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) in build/fuzz
# and runs each for a while from its seed corpus, with bounded memory, as many
# targets at once as there are cores.
#   bash scripts/fuzz.sh                 every target for 300 s
#   bash scripts/fuzz.sh --seconds 12    every target for 12 s (what CI runs)
#   bash scripts/fuzz.sh --seconds 60 fuzz_json fuzz_npy
# A crash, a sanitizer report, an invariant failure, a timeout (10 s per input)
# or more than 2 GiB of memory stops the run with the input saved in
# build/fuzz/findings/; the script then exits non-zero. New inputs found go to
# build/fuzz/corpus/<target>/ (the seeds in tests/fuzz/corpus stay as they are).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=300
targets=()
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        fuzz_*) targets+=("$1"); shift ;;
        *) echo "fuzz: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
bash scripts/setup.sh >/dev/null
cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCPX_BUILD_FUZZERS=ON \
      -DCPX_BUILD_TESTS=OFF -DCPX_BUILD_EXAMPLES=OFF -DCPX_BUILD_TOOLS=OFF -DCPX_CUDA=OFF >/dev/null
jobs=$(nproc)
if ((${#targets[@]} == 0)); then
    for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
    # All of them: the default target, so that make compiles them side by side (several
    # --target names are built one after the other).
    cmake --build build/fuzz -j "$jobs"
else
    cmake --build build/fuzz -j "$jobs" --target "${targets[@]}"
fi
mkdir -p build/fuzz/findings

# One target: one libFuzzer process; up to one per core run at once, each for the full time.
fuzz_one() {
    local t=$1
    local corpus=build/fuzz/corpus/$t
    local dict=() rc=0
    mkdir -p "$corpus"
    [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
    # OpenMP kept to one thread (the parsers do not use it).
    OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "build/fuzz/tests/fuzz/$t" "$corpus" "tests/fuzz/corpus/$t" "${dict[@]}" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=65536 \
        -artifact_prefix="build/fuzz/findings/$t-" -print_final_stats=1 >"build/fuzz/$t.log" 2>&1 || rc=$?
    echo "$rc" >"build/fuzz/$t.status"
}
running=0
for t in "${targets[@]}"; do
    rm -f "build/fuzz/$t.status"
    if ((running >= jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait || true

status=0
printf '%-24s %10s %10s %8s\n' target runs exec/s corpus
for t in "${targets[@]}"; do
    log=build/fuzz/$t.log
    if [ "$(cat "build/fuzz/$t.status" 2>/dev/null)" = 0 ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
        size=$(find "build/fuzz/corpus/$t" -type f | wc -l)
        printf '%-24s %10s %10s %8s\n' "$t" "${runs:-?}" "${rate:-?}" "$size"
    else
        echo "fuzz: $t FAILED; the end of its log ($log):" >&2
        tail -40 "$log" >&2
        status=1
    fi
done
exit $status
