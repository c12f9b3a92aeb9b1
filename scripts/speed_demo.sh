#!/usr/bin/env bash
# The speed demonstration: builds the 187M COMPLEXITY-DEEP preset, draws the papers' seeded random
# initialisation, prefills a prompt of token ids and generates through the KV cache, reporting
# prefill and decode tokens per second (the generated ids of random weights mean nothing).
# Extra arguments go to the program (e.g. --tokens 1,2,3 --generate 64 --dtype bf16).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release -DCPX_CUDA=OFF >/dev/null
cmake --build --preset release --target complexity_run_ComplexityDeep187M -j "$(nproc)"
./build/release/examples/complexity_run_ComplexityDeep187M "$@"
