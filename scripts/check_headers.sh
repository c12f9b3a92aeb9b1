#!/usr/bin/env bash
# Compiles every public C++ header under include/ on its own (one translation unit that
# includes only it, syntax only), so that each header includes what it uses and a user can
# include any one of them first. A header that leans on another one's includes builds inside
# the library's own files and fails in a user's.
#   bash scripts/check_headers.sh             every .hpp, and every .cuh where nvcc is found
#                                             (~2.5 + ~1.5 minutes on 2 cores)
#   bash scripts/check_headers.sh cpx/cpu     the headers under include/cpx/cpu
# A CUDA header (.cuh) goes through nvcc's front end only (`--cuda`: preprocessing and the
# parse of host and device code for one architecture, ~4 s a header; no code generated), which
# is what a missing include breaks. Exits non-zero, listing each failing header and its first
# errors.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
under="include/${1:-cpx}"
[ -d "$under" ] || { echo "check_headers: no directory $under" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export work
check() {  # $1: a header path under include/
    local tu="$work/$(echo "$1" | tr '/.' '__').cpp"
    echo "#include \"${1#include/}\"" > "$tu"
    if ! out=$(${CXX:-g++} -std=gnu++20 -fsyntax-only -fopenmp -Iinclude -isystem /usr/include/eigen3 "$tu" 2>&1); then
        printf 'check_headers: %s does not compile alone:\n%s\n' "$1" "$(echo "$out" | grep -m3 error)"
        return 1
    fi
}
check_cuda() {  # $1: a .cuh path under include/
    local tu="$work/$(echo "$1" | tr '/.' '__').cu"
    echo "#include \"${1#include/}\"" > "$tu"
    if ! out=$("$nvcc" -std=c++20 --expt-relaxed-constexpr --extended-lambda -x cu --cuda -arch=sm_90 -Iinclude \
        -isystem /usr/include/eigen3 "$tu" -o "${tu%.cu}.ii" 2>&1); then
        printf 'check_headers: %s does not compile alone:\n%s\n' "$1" "$(echo "$out" | grep -m3 error)"
        return 1
    fi
}
export -f check check_cuda
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
export nvcc
status=0
count=$(find "$under" -name '*.hpp' | wc -l)
if [ "$count" -gt 0 ]; then
    if find "$under" -name '*.hpp' | sort | xargs -P "$(nproc)" -I{} bash -c 'check "$@"' _ {}; then
        echo "check_headers: $count headers under $under compile on their own"
    else
        status=1
    fi
fi
count=$(find "$under" -name '*.cuh' | wc -l)
if [ "$count" -gt 0 ]; then
    if [ -z "$nvcc" ]; then
        echo "check_headers: no nvcc: the $count CUDA headers under $under are not checked"
    elif find "$under" -name '*.cuh' | sort | xargs -P "$(nproc)" -I{} bash -c 'check_cuda "$@"' _ {}; then
        echo "check_headers: $count CUDA headers under $under pass nvcc's front end on their own"
    else
        status=1
    fi
fi
exit $status
