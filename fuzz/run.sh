#!/bin/sh
# make fuzz: run each go test -fuzz target of ./fuzz for a short, fixed time (FUZZTIME, default 20s each).
# New failing inputs are written to fuzz/testdata/fuzz/<Target>/ by the go tool: commit them as regression
# seeds once fixed. Longer hunts: FUZZTIME=10m ./fuzz/run.sh, or the campaign: gmlake fuzz --duration 5m.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
targets=$($GO test -list '^Fuzz' ./fuzz | grep '^Fuzz')
for t in $targets; do
	echo "== $t ($FUZZTIME)"
	$GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 30s ./fuzz
done
