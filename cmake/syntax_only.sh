#!/bin/sh
# Compiler launcher of the benchmark suites' compile check (bench/CMakeLists.txt,
# CPX_CHECK_BENCHMARKS): runs the compile command it is given with -fsyntax-only, then, when
# the compiler accepted the source, leaves an empty file where the command's -o names the
# object, so that the build tool counts the step as done (its dependency file is written as
# usual, so a header change checks the source again).
out=
prev=
for arg in "$@"; do
    [ "$prev" = "-o" ] && out=$arg
    prev=$arg
done
"$@" -fsyntax-only || exit $?
if [ -n "$out" ]; then
    : >"$out"
fi
