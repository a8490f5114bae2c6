#!/bin/sh
# make fuzz: run each go test -fuzz target of ./fuzz for a short, fixed time (FUZZTIME, default 20s each).
# New failing inputs are written to fuzz/testdata/fuzz/<Target>/ by the go tool: commit them as regression
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
targets=$($GO test -list '^Fuzz' ./fuzz | grep '^Fuzz') || { echo "fuzz: cannot list the targets"; exit 1; }
failed=""
for t in $targets; do
	echo "== $t ($FUZZTIME)"
	$GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZE" ./fuzz || failed="$failed $t"
done
if [ -n "$failed" ]; then
	echo "fuzz: FAILED:$failed"
	exit 1
fi
echo "fuzz: all targets passed"
