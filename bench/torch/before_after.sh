#!/usr/bin/env bash
# Before/after on one GPU machine in one run (issue 38): bench/torch/breakdown.sh and hotpath_bench.sh with the
# wheel in $BEFORE (built from an older commit: git worktree add /tmp/wt C && make -C /tmp/wt wheel, copied to
# bin/before/), then with dist/'s wheel. Each script measures native and expandable_segments again beside
# gmlake, so every ratio is against the anchor of the same run.
# bin/before/perf holds the older commit's perf binaries (make -C /tmp/wt perf-bins), so the Go layers are
# measured before and after too. SIDES="before" or "after" runs one side (two calls on one warm machine,
# each under the device's 10-minute limit).
#   OUT=$OUT bash bench/torch/before_after.sh      # carry dist, bin/before, bin/perf; about 8 minutes on an H100
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/before_after}
PY=${PYTHON:-python3}
BEFORE=${BEFORE:-$(ls "$REPO"/bin/before/gmlake_torch-*.whl | head -1)}
AFTER=${AFTER:-$(ls "$REPO"/dist/gmlake_torch-*.whl | head -1)}
T0=$(date +%s)
for side in ${SIDES:-before after}; do
	whl=$BEFORE perf=$REPO/bin/before/perf
	[ "$side" = after ] && whl=$AFTER perf=$REPO/bin/perf
	[ -d "$perf" ] || perf=$REPO/bin/perf
	echo "== [$(($(date +%s) - T0))s] $side: $whl"
	WHEEL=$whl PERF=$perf OUT=$OUT/$side bash "$HERE/breakdown.sh" 2>&1 | tail -30
	echo "== [$(($(date +%s) - T0))s] $side: hotpath"
	OUT=$OUT/$side bash "$HERE/hotpath_bench.sh" 2>&1 | tail -30
done
echo "== [$(($(date +%s) - T0))s] done"
