#!/usr/bin/env bash
# Builds everything a GPU check needs on this machine (nvcc is enough, no GPU) and packs it for a
# GPU machine that has the NVIDIA driver and cuBLAS but none of the build dependencies:
#   bash scripts/cuda_pack.sh              -> build/cuda-pack.tar.xz
# then, on the GPU machine, from a checkout of the same commit (the examples read data/kjv):
#   tar xJf cuda-pack.tar.xz -C /tmp && bash /tmp/cuda-pack/run.sh [RESULTS_DIR]
# Packed: the GPU tests, the CUDA-enabled example programs of the demo and tiny presets, and the
# GPU benchmark, built for any x86-64-v3 CPU and for CUDA_ARCH (default 90: H100/H200), stripped,
# with the shared libraries a bare CUDA machine may lack (Google Benchmark, libgomp, libpcre2,
# the CUDA runtime). scripts/cuda_pack_run.sh (packed as run.sh) says what it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null 2>&1 || { echo "cuda_pack: nvcc not found (install the CUDA Toolkit)" >&2; exit 1; }
arch=${CUDA_ARCH:-90}
build=build/cuda-pack
bash scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCPX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCPX_BUILD_BENCHMARKS=ON -DCPX_BUILD_TESTS=ON -DCPX_BUILD_LARGE_PRESET_PROGRAMS=OFF \
    "-DCPX_RUN_CUDA_PRESETS=KjvDeep;TinyComplexity;TinyTopK;TinyComplexityPrism;TinyPrism" \
    -DCMAKE_CXX_FLAGS="-march=x86-64-v3" "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc" >/dev/null
tests=$(ls tests/cuda/test_*.cu | sed -E 's|tests/cuda/test_(.*)\.cu|cuda_test_\1|')
programs="complexity_run_KjvDeep complexity_run_TinyComplexity complexity_run_TinyTopK complexity_run_TinyComplexityPrism prism_run_TinyPrism"
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $tests $programs bench_cuda_models

stage=$build/stage/cuda-pack
rm -rf "$build/stage" && mkdir -p "$stage/bin" "$stage/lib"
for t in $tests $programs bench_cuda_models; do
    f=$(find "$build" -path "$build/stage" -prune -o -type f -name "$t" -perm -u+x -print | head -1)
    [ -n "$f" ] || { echo "cuda_pack: $t was not built" >&2; exit 1; }
    strip -o "$stage/bin/$t" "$f"
done
# The libraries outside the C/C++ runtime and the driver's own, except cuBLAS (hundreds of MB,
# part of every CUDA installation: run.sh finds it there).
ldd "$stage"/bin/* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++*|libgcc_s*|ld-linux*|libcublas*|libcuda.so*) ;;
        *) cp -L "$path" "$stage/lib/$name" ;;
    esac
done
cp scripts/cuda_pack_run.sh "$stage/run.sh"
git rev-parse HEAD > "$stage/commit.txt" 2>/dev/null || true
tar -C "$build/stage" -cJf build/cuda-pack.tar.xz cuda-pack
echo "cuda_pack: build/cuda-pack.tar.xz ($(du -h build/cuda-pack.tar.xz | cut -f1)): $(ls "$stage/bin" | wc -l) programs, libraries: $(ls "$stage/lib" | tr '\n' ' ')"
