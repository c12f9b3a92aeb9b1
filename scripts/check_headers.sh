#!/usr/bin/env bash
# Compiles every public C++ header under include/ on its own (one translation unit that
# includes only it, syntax only), so that each header includes what it uses and a user can
# include any one of them first. A header that leans on another one's includes builds inside
# the library's own files and fails in a user's.
#   bash scripts/check_headers.sh             every .hpp (~2.5 minutes on 2 cores)
#   bash scripts/check_headers.sh cpx/cpu     the headers under include/cpx/cpu
# The CUDA headers (.cuh) are left out: nvcc has no syntax-only mode, and compiling each alone
# takes longer than the test suite's budget allows; the CUDA test programs include them in
# several orders. Exits non-zero, listing each failing header and its first errors.
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
export -f check
count=$(find "$under" -name '*.hpp' | wc -l)
if find "$under" -name '*.hpp' | sort | xargs -P "$(nproc)" -I{} bash -c 'check "$@"' _ {}; then
    echo "check_headers: $count headers under $under compile on their own"
else
    exit 1
fi
