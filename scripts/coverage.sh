#!/usr/bin/env bash
# Line coverage of the headers by the CPU unit tests: which lines of include/cpx no test runs.
# Builds the `coverage` preset (g++ --coverage at -O1, -march=native, build/coverage), runs the
# unit tests, and writes with gcovr
#   build/coverage/report/index.html   every header, line by line (open it in a browser)
#   build/coverage/report/summary.txt  lines run per header and the lines not run, least covered last
#   build/coverage/report/summary.json the same per header as JSON (lines, functions, branches)
# and prints the headers with the most lines no test ran.
#   bash scripts/coverage.sh                      every unit test
#   bash scripts/coverage.sh test_npy test_json   these tests only (CTest names), after a build
# The counts start from zero each run. Not part of CI: build and tests took ~3.5 minutes on 2 cores
# and the report is for reading, not a gate. Coverage depends on the machine: the AVX-512, AVX2
# and AMX kernels run only where the CPU has them (the others' lines show as not run), and the
# GPU path is not built. The consumer-project and compile-failure tests are left out: they build
# other projects, with their own flags, and run none of this build's code.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=()
while (($#)); do
    case "$1" in
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        test_*) tests+=("$1"); shift ;;
        *) echo "coverage: unknown argument '$1' (test names start with test_)" >&2; exit 2 ;;
    esac
done
bash scripts/setup.sh --coverage >/dev/null

cmake --preset coverage >/dev/null
cmake --build --preset coverage -j "$(nproc)"
find build/coverage -name '*.gcda' -delete
filter='^(test_|tests_)'
if ((${#tests[@]})); then
    filter="^($(IFS='|'; echo "${tests[*]}"))\$"
fi
# A failing test still leaves its counts; the report is written either way and the status kept.
status=0
ctest --preset coverage -j "$(nproc)" -R "$filter" || status=$?

out=build/coverage/report
rm -rf "$out" && mkdir -p "$out"
# Headers only (the library); the tests' own sources are not what is measured. Lines the compiler
# emitted no code for (declarations, unused templates) count as neither run nor missed.
gcovr_args=(--root . --object-directory build/coverage --filter 'include/cpx/' --exclude 'include/cpx/cuda/'
            --gcov-ignore-parse-errors -j "$(nproc)")
gcovr "${gcovr_args[@]}" --html-details "$out/index.html" --txt "$out/summary.txt" --sort-percentage \
      --json-summary "$out/summary.json" --print-summary | tail -n 3
echo "coverage: the headers with the most lines no test ran (the lines: $out/summary.txt):"
python3 - "$out/summary.json" <<'PY'
import json, sys
files = json.load(open(sys.argv[1]))["files"]
missed = sorted(files, key=lambda f: f["line_covered"] - f["line_total"])
for f in missed[:15]:
    if f["line_covered"] < f["line_total"]:
        print(f'  {f["line_total"] - f["line_covered"]:4d} of {f["line_total"]:4d} lines not run  {f["filename"]}')
PY
echo "coverage: report in $out/index.html"
exit "$status"
