#!/usr/bin/env bash
# Installs what the build needs and is missing (Debian packages), and nothing
# else. Safe to re-run: packages already present are left alone.
#   --bench      also what scripts/bench.sh needs for its plots (python3-matplotlib)
#   --coverage   also what scripts/coverage.sh needs for its report (gcovr)
set -euo pipefail

# python3-torch and python3-numpy: the independent PyTorch reference of the test suite;
# libopenblas0-pthread: an optimised BLAS for it (Debian's torch otherwise runs on the reference BLAS).
# libpcre2-dev: the tokenizer's regular expressions (cpx::text).
# clang and libomp-dev: the test suite also builds a consumer project with clang++.
packages=(cmake make g++ clang libomp-dev libeigen3-dev nlohmann-json3-dev libcli11-dev doctest-dev libbenchmark-dev python3 python3-numpy python3-torch libopenblas0-pthread libpcre2-dev)
for arg in "$@"; do
    case "$arg" in
        --bench) packages+=(python3-matplotlib) ;;
        --coverage) packages+=(gcovr) ;;
        *) echo "setup: unknown option '$arg' (known: --bench, --coverage)" >&2; exit 2 ;;
    esac
done
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    echo "setup: all build dependencies present"
fi
