#!/usr/bin/env bash
# One command on a fresh machine: installs what is missing, builds the example
# programs and runs the main job on its built-in default (a seeded random
# COMPLEXITY-DEEP model). Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "run: building the CPU demo program (the CUDA path is not needed for it)"
cmake --preset release -DCPX_CUDA=OFF >/dev/null
cmake --build --preset release --target complexity_run_ComplexityDeep187M -j "$(nproc)"
./build/release/examples/complexity_run_ComplexityDeep187M "$@"
