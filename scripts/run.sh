#!/usr/bin/env bash
# One command on a fresh machine: installs what is missing, builds the demo program and runs the
# main job on its built-in default: the small COMPLEXITY-DEEP model trained on the King James Bible
# (weights and tokenizer in data/kjv, docs/DEMO_MODEL.md) continues a built-in prompt and prints
# the text as it is generated, with tokens per second. Extra arguments go to the program, e.g.
#   bash scripts/run.sh --prompt "And the LORD said unto Moses" --generate 64 --temperature 0.8
#   bash scripts/run.sh --eval data/kjv/validation.txt
# The 187M model's speed demonstration (random weights) is scripts/speed_demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "run: building the CPU demo program (the CUDA path is not needed for it)"
cmake --preset release -DCPX_CUDA=OFF >/dev/null
cmake --build --preset release --target complexity_run_KjvDeep -j "$(nproc)"
if (($# == 0)); then
    set -- --prompt "And God said" --generate 64 --temperature 0.8 --top-k 40 --seed 1
fi
./build/release/examples/complexity_run_KjvDeep "$@"
