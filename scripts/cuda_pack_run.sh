#!/usr/bin/env bash
# Packed by scripts/cuda_pack.sh as cuda-pack/run.sh. On a GPU machine, from the root of a checkout
# of the commit in cuda-pack/commit.txt:  bash /path/to/cuda-pack/run.sh [RESULTS_DIR]
# Runs, in order, each step bounded in time: the GPU tests; each under compute-sanitizer memcheck,
# racecheck and synccheck (where compute-sanitizer exists; SANITIZE=0 skips); the example programs
# on the CPU and with --device cuda, comparing their logits (with python3 and numpy); the GPU
# benchmark (BENCH=0 skips; BENCH_FILTER narrows it). Writes logs, bench JSON and a summary to
# RESULTS_DIR (default cuda-pack-results). Exit status: 77 without a usable CUDA device, otherwise
# non-zero if a test, a sanitizer or a comparison failed.
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
out=${1:-cuda-pack-results}
mkdir -p "$out"
bin=$pack/bin
cublas=$(find /usr/local /usr/lib /opt -name 'libcublas.so.1*' 2>/dev/null | head -1)
[ -n "$cublas" ] || echo "run: libcublas not found under /usr/local, /usr/lib, /opt; relying on the loader's path"
export LD_LIBRARY_PATH=${cublas:+$(dirname "$cublas"):}$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; date -u +%FT%TZ
  echo "commit $(cat "$pack/commit.txt" 2>/dev/null)"; } | tee "$out/device.txt"
if ldd "$bin"/* | grep -q "not found"; then ldd "$bin"/* | grep "not found" | sort -u; say "run: libraries missing"; exit 1; fi
probe=$("$bin/cuda_test_rmsnorm" 2>&1)
if [ $? -eq 77 ]; then say "run: no usable CUDA device: $(echo "$probe" | head -1)"; exit 77; fi

tests=$(cd "$bin" && ls cuda_test_* 2>/dev/null)
for t in $tests; do
    timeout 300 "$bin/$t" >"$out/$t.log" 2>&1; rc=$?
    [ $rc -eq 0 ] || status=1
    say "$t rc=$rc $(grep -E '^\[doctest\] test cases' "$out/$t.log" | tr -s ' ')"
done

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    for t in $tests; do
        for tool in memcheck racecheck synccheck; do
            timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$bin/$t" >"$out/$t.$tool.log" 2>&1; rc=$?
            [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1
            say "$tool $t rc=$rc $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$t.$tool.log")"
        done
    done
fi

npy=$out/logits
mkdir -p "$npy"
run_pair() {  # name program args...: the program on the CPU and on the GPU, logits to $npy/name_{cpu,cuda}.npy
    local name=$1 prog=$2; shift 2
    for dev in cpu cuda; do
        timeout 300 "$bin/$prog" "$@" --device $dev --dump-logits "$npy/${name}_$dev.npy" >"$out/$name.$dev.log" 2>&1
        local rc=$?
        [ $rc -eq 0 ] || status=1
        say "$name $dev rc=$rc $(grep -m1 '^generated:' "$out/$name.$dev.log")"
    done
}
if [ -d data/kjv/deep ]; then
    run_pair kjv complexity_run_KjvDeep --checkpoint data/kjv/deep --prompt "And God said" --generate 24 --temperature 0
else
    say "run: data/kjv/deep not here (run from the checkout's root): the demo checkpoint is skipped"
fi
for p in TinyComplexity TinyTopK TinyComplexityPrism; do
    run_pair "$p" "complexity_run_$p" --tokens 1,2,3,4,5,6,7 --generate 8
done
run_pair TinyPrism prism_run_TinyPrism --tokens 1,2,3,4,5 --generate 6
if python3 -c "import numpy" 2>/dev/null; then
    python3 - "$npy" <<'PY' | tee -a "$summary" || status=1
import glob, os, sys
import numpy as np
bad = False
for a in sorted(glob.glob(os.path.join(sys.argv[1], "*_cpu.npy"))):
    b = a[:-len("_cpu.npy")] + "_cuda.npy"
    name = os.path.basename(a)[:-len("_cpu.npy")]
    if not os.path.exists(b):
        print(f"{name}: no GPU logits"); bad = True; continue
    x, y = np.load(a), np.load(b)
    rel = float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30))
    agree = float(np.mean(x.argmax(-1) == y.argmax(-1)))
    ok = x.shape == y.shape and rel < 1e-4 and agree == 1.0
    bad |= not ok
    print(f"{name}: logits {x.shape} max relative difference {rel:.3g}, argmax agreement {agree:.3f} {'ok' if ok else 'MISMATCH'}")
sys.exit(1 if bad else 0)
PY
else
    say "run: no python3 with numpy: the logits are in $npy, not compared"
fi

if [ "${BENCH:-1}" = 1 ]; then
    timeout 1200 "$bin/bench_cuda_models" ${BENCH_FILTER:+--benchmark_filter="$BENCH_FILTER"} \
        --benchmark_out="$out/bench_cuda_models.json" --benchmark_out_format=json \
        --benchmark_counters_tabular=true >"$out/bench_cuda_models.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    say "bench_cuda_models rc=$rc"
fi
say "run: $( [ $status -eq 0 ] && echo all passed || echo FAILURES ) (logs in $out)"
exit $status
