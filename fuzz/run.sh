#!/bin/sh
# make fuzz: run each go test -fuzz target of the project for a short, fixed time (FUZZTIME, default 20s each):
# ./fuzz (the op language, the GPU target), ./trace (the trace reader), ./impl/clib (the settings parser),
# ./capi (the C ABI, against the shipped libgmlake.so, built once here: GMLAKE_LIB).
# New failing inputs are written to <package>/testdata/fuzz/<Target>/ by the go tool: commit them as regression
# seeds once fixed (`go run ./cmd/gmlake fuzz --replay FILE --minimize` shows and shrinks one).
# Minimization is bounded by runs (FUZZMINIMIZE, default 20x), not time: minimizing a ~1 KB program by time
# held every worker and fuzzed nothing (docs/verification.md, FuzzOpsOnGPU). 20x is the most FuzzOpsOnGPU
# accepts (maxGPUMinimizeExecs in fuzz/gpu_test.go; it refuses more before it looks for a GPU, so 50x failed
# `make fuzz` on every machine); TestFuzzScriptMinimizesWithinEveryTargetsLimit holds the two together. Longer hunts: FUZZTIME=10m ./fuzz/run.sh, or a campaign: go run ./cmd/gmlake fuzz --duration 5m.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
FUZZMINIMIZE=${FUZZMINIMIZE:-20x}
PKGS=${PKGS:-./fuzz ./trace ./impl/clib ./capi}
failed=""
for pkg in $PKGS; do
	targets=$($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz') || { echo "fuzz: cannot list the targets of $pkg"; exit 1; }
	env=""
	if [ "$pkg" = ./capi ]; then
		# Every fuzzing worker is a process of its own: one library for all of them, not one build each.
		$GO build -buildmode=c-shared -o capi/libgmlake.so ./capi || { echo "fuzz: cannot build capi/libgmlake.so"; exit 1; }
		env="GMLAKE_LIB=$(pwd)/capi/libgmlake.so"
	fi
	for t in $targets; do
		echo "== $pkg $t ($FUZZTIME)"
		env $env $GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZE" "$pkg" || failed="$failed $pkg:$t"
	done
done
if [ -n "$failed" ]; then
	echo "fuzz: FAILED:$failed"
	exit 1
fi
echo "fuzz: all targets passed"
