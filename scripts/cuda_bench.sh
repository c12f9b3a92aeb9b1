#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the GPU benchmark suite (preset "bench",
# CUDA on) and runs it, writing Google Benchmark's JSON and console output to
# $OUT_DIR (default build/bench/cuda-results). The suite measures the device's
# own ceilings (cuBLAS bf16 GEMM rate, device copy rate) in the same run; see
# bench/bench_cuda_models.cu for what each case counts and docs/CUDA.md for results.
# Extra arguments go to the benchmark binary (e.g. --benchmark_filter=decode).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
OUT_DIR=${OUT_DIR:-build/bench/cuda-results}
mkdir -p "$OUT_DIR"
bash scripts/setup.sh
cmake --preset bench -DCPX_CUDA=ON >"$OUT_DIR/configure.log"
cmake --build --preset bench -j "$(nproc)" --target bench_cuda_models >"$OUT_DIR/build.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT_DIR/device.txt"
date -u +"%Y-%m-%dT%H:%M:%SZ" | tee -a "$OUT_DIR/device.txt"
build/bench/bench/bench_cuda_models --benchmark_out="$OUT_DIR/bench_cuda_models.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true "$@" | tee "$OUT_DIR/bench_cuda_models.txt"
