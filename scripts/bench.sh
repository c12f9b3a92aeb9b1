#!/usr/bin/env bash
# Builds the benchmark preset, runs every Google Benchmark suite (JSON under
# build/bench/results/), runs the peers of the same cases (PyTorch eager:
# Debian's 1.13 and the current 2.x; OpenVINO for whole-model prefill and decode; the
# last two from PyPI into build/peers-venv by scripts/setup_peers.sh), and
# turns it all into docs/BENCHMARKS.md and docs/img/*.png (bench/report.py).
#
# Environment:
#   BENCH_MIN_TIME     seconds per repetition of a case (default 0.3)
#   BENCH_REPETITIONS  repetitions per case; the median is reported (default 3)
#   BENCH_FILTER       regular expression: run only the matching cases
#   BENCH_SUITES       suites to run (default: machine norms linear attention mlp complexity_model prism_model)
#   CPX_BENCH_LARGE=1  adds the opt-in large shapes (1.5B pilot, 4096-token prefill)
#   BENCH_PAIRED_ROUNDS  rounds of the alternated prefill stage (bench/python/paired_prefill.py; default 5)
#   BENCH_PAIRED_TOKENS  its prompt lengths (default 512; "512 2048" adds the 187M 2,048-token cases)
#   SKIP_BUILD=1, SKIP_TORCH=1, SKIP_PEERS=1, SKIP_PAIRED=1, SKIP_REPORT=1   skip a stage
#     (SKIP_TORCH: Debian's PyTorch; SKIP_PEERS: PyTorch 2 and OpenVINO; SKIP_PAIRED: the alternated stage)
#   PYTHON             interpreter with torch, numpy and matplotlib (default: the first python3 that has them)
#   BENCH_RESULTS      directory of the JSON results (default build/bench/results)
#   BENCH_REPORT, BENCH_IMG, BENCH_NOTES   the report, its plots' directory and the hand-written
#     discussion it ends with (default docs/BENCHMARKS.md, docs/img, bench/report_notes.md): a
#     machine of another kind gets its own page (docs/BENCHMARKS_AVX2.md: a CPU without AVX-512;
#     docs/BENCHMARKS_AMX.md: a CPU with AMX)
# Timings are only as good as the machine is quiet: the script records the load
# average before and after every suite, and the report prints it. Suites can be
# run one at a time (BENCH_SUITES=mlp) when the machine is quiet; the report
# reads whatever results the directory holds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --bench

min_time=${BENCH_MIN_TIME:-0.3}
repetitions=${BENCH_REPETITIONS:-3}
paired_rounds=${BENCH_PAIRED_ROUNDS:-5}
read -r -a paired_tokens <<<"${BENCH_PAIRED_TOKENS:-512}"
filter=${BENCH_FILTER:-}
suites=${BENCH_SUITES:-machine norms linear attention mlp complexity_model prism_model}
results=${BENCH_RESULTS:-build/bench/results}
report=${BENCH_REPORT:-docs/BENCHMARKS.md}
report_img=${BENCH_IMG:-docs/img}
report_notes=${BENCH_NOTES:-bench/report_notes.md}
mkdir -p "$results"

python_with() {  # the first interpreter that imports all the given modules
    local modules=$1 candidate
    for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import $modules" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if [ -z "${SKIP_BUILD:-}" ]; then
    cmake --preset bench -DCPX_BUILD_EXAMPLES=OFF -DCPX_BUILD_TOOLS=OFF >/dev/null
    targets=()
    for s in $suites; do targets+=("bench_$s"); done
    cmake --build build/bench -j "$(nproc)" --target "${targets[@]}"
fi

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# Load average before and after each stage, one file per stage, so suites can
# be run (and re-run) separately when the machine is quiet.
stage() {  # stage <name> <command...>
    local name=$1 before start
    shift
    before=$(loadavg)
    start=$(date -Is)
    "$@"
    printf '{"stage": "%s", "start": "%s", "end": "%s", "load_before": "%s", "load_after": "%s"}\n' \
        "$name" "$start" "$(date -Is)" "$before" "$(loadavg)" >"$results/load_$name.json"
}

torch_py=""
if [ -z "${SKIP_TORCH:-}" ]; then
    torch_py=$(python_with "torch, numpy") ||
        echo "bench: no python3 with torch found (apt-get install python3-torch); the PyTorch column stays empty" >&2
fi

peers_py=""
if [ -z "${SKIP_PEERS:-}" ]; then
    if bash scripts/setup_peers.sh; then
        peers_py=build/peers-venv/bin/python
    else
        echo "bench: the PyPI peers could not be installed; their columns stay empty" >&2
    fi
fi

# Each C++ suite, then its peers right after it (similar machine conditions).
for s in $suites; do
    args=(--benchmark_min_time="$min_time" --benchmark_repetitions="$repetitions"
          --benchmark_display_aggregates_only=true
          --benchmark_out="$results/bench_$s.json" --benchmark_out_format=json)
    [ -n "$filter" ] && args+=(--benchmark_filter="$filter")
    echo "== bench_$s"
    stage "bench_$s" "build/bench/bench/bench_$s" "${args[@]}"
    if [ -n "$torch_py" ] && [ "$s" != machine ]; then
        echo "== PyTorch eager: $s ($torch_py)"
        peer_args=(--suite "$s" --out "$results/pytorch_$s.json" --min-time "$min_time" --repetitions "$repetitions")
        [ -n "$filter" ] && peer_args+=(--filter "$filter")
        # Without bf16 instructions PyTorch 1.13 emulates bf16 products: about a minute per
        # 512-token prefill of the 187M model, hours for the suite. Those cases get no column.
        if ! grep -q -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
            peer_args+=(--exclude '/bf16/prefill/')
            echo "bench: no bf16 instructions on this CPU: Debian's PyTorch skips its bf16 prefill cases"
        fi
        stage "pytorch_$s" "$torch_py" bench/python/pytorch_peer.py "${peer_args[@]}"
    fi
    if [ -n "$peers_py" ] && [ "$s" != machine ]; then
        peer_args=(--suite "$s" --min-time "$min_time" --repetitions "$repetitions")
        [ -n "$filter" ] && peer_args+=(--filter "$filter")
        echo "== PyTorch 2 eager: $s"
        stage "pytorch2_$s" "$peers_py" bench/python/pytorch_peer.py "${peer_args[@]}" --out "$results/pytorch2_$s.json"
        case $s in
            complexity_model | prism_model)
                echo "== OpenVINO: $s"
                stage "openvino_$s" "$peers_py" bench/python/openvino_peer.py "${peer_args[@]}" \
                    --out "$results/openvino_$s.json" ;;
        esac
        # The targets' prefill cases once more, ours and the peers in turns (bench/python/paired_prefill.py):
        # ratios taken within seconds, not across stages minutes apart.
        if [ "$s" = complexity_model ] && [ -z "${SKIP_PAIRED:-}" ]; then
            paired_args=(--binary build/bench/bench/bench_complexity_model --rounds "$paired_rounds"
                         --tokens "${paired_tokens[@]}" --out "$results/paired_prefill.json")
            [ -n "$filter" ] && paired_args+=(--filter "$filter")
            echo "== ours, PyTorch 2 and OpenVINO alternated: prefill"
            stage "paired_prefill" "$peers_py" bench/python/paired_prefill.py "${paired_args[@]}"
        fi
    fi
done

# The machine, for the report.
{
    echo "{"
    echo "  \"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\","
    echo "  \"cpus\": $(nproc),"
    echo "  \"flags_avx512\": \"$(grep -o -w -E 'avx2|fma|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')\","
    echo "  \"l3\": \"$(lscpu | sed -n 's/^L3 cache: *//p' | head -1)\","
    echo "  \"memory\": \"$(free -g | awk '/^Mem:/ {print $2 " GiB"}')\","
    echo "  \"hypervisor\": \"$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)\","
    echo "  \"kernel\": \"$(uname -r)\","
    echo "  \"compiler\": \"$(c++ --version | head -1)\","
    echo "  \"eigen\": \"$(sed -n 's/^#define EIGEN_[A-Z]*_VERSION *\([0-9]*\)/\1/p' /usr/include/eigen3/Eigen/src/Core/util/Macros.h | head -3 | tr '\n' '.' | sed 's/\.$//')\","
    echo "  \"git\": \"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\","
    echo "  \"date\": \"$(date -Is)\""
    echo "}"
} >"$results/machine.json"

if [ -z "${SKIP_REPORT:-}" ]; then
    if py=$(python_with "matplotlib"); then
        "$py" bench/report.py --results "$results" --out "$report" --img "$report_img" --notes "$report_notes"
    else  # the tables need only python3; the plots stay as they were
        echo "bench: no python3 with matplotlib found (scripts/setup.sh --bench); $report written without plots" >&2
        python3 bench/report.py --results "$results" --out "$report" --no-plots --notes "$report_notes"
    fi
fi
