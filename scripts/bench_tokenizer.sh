#!/usr/bin/env bash
# Tokenizer speed, ours against the reference, on one thread, one after the other:
#   bash scripts/bench_tokenizer.sh [TOKENIZER_JSON [TEXT_FILE]]
# Default: the demo model's tokenizer (data/kjv/deep) on its validation text. Builds
# bench_tokenizer (preset "bench"), installs the reference (`tokenizers`, PyPI) into
# build/bench-venv, and prints the CPU, our Google Benchmark rates and the reference's.
set -euo pipefail
cd "$(dirname "$0")/.."
tokenizer=${1:-data/kjv/deep/tokenizer.json}
text=${2:-data/kjv/validation.txt}
bash scripts/setup.sh >/dev/null
cmake --preset bench >/dev/null
cmake --build --preset bench --target bench_tokenizer -j "$(nproc)"
if [ ! -x build/bench-venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages build/bench-venv
fi
build/bench-venv/bin/python -c "import tokenizers" 2>/dev/null || build/bench-venv/bin/pip install -q tokenizers
echo "cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "tokenizer: $tokenizer; text: $text ($(wc -c <"$text") bytes)"
CPX_TOKENIZER="$tokenizer" CPX_TOKENIZER_TEXT="$text" OMP_NUM_THREADS=1 \
    taskset -c 0 build/bench/bench/bench_tokenizer --benchmark_min_time=1 --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true
taskset -c 0 build/bench-venv/bin/python bench/python/tokenizer_peer.py "$tokenizer" "$text"
