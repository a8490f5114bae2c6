#!/usr/bin/env bash
# The per-pair breakdown on the GPU machine (issue 38 item 1): bench/torch/breakdown.py once per allocator
# (native, expandable_segments, gmlake installed from the wheel with GMLAKE=1), in turn, twice each (the
# order alternates, so a drift of the machine shows as a spread), then the Go layers below the C ABI from the
# test binaries that `make perf-bins` builds into bin/perf (no Go on the GPU machine), then the table.
#   bench/torch/breakdown.sh            # needs dist/gmlake_torch-*.whl and bin/perf/*.test (carry dist, bin/perf)
# WHEEL: another wheel; PERF: another folder of perf binaries (the same commit as WHEEL, for a before/after).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/breakdown}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE_LIB GMLAKE
RES=$OUT/breakdown.jsonl
: >"$RES"
WHL=${WHEEL:-$(ls "$REPO"/dist/gmlake_torch-*.whl | head -1)}
PERF=${PERF:-$REPO/bin/perf}
"$PY" -m pip install -q --no-index --no-deps --force-reinstall "$WHL" 2>&1 | tail -2
cd /
for round in 1 2; do
	order="native expandable gmlake"
	[ "$round" = 2 ] && order="gmlake expandable native"
	for a in $order; do
		echo "== round $round: $a"
		case $a in
		native) "$PY" "$HERE/breakdown.py" --out "$RES" ;;
		expandable) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$PY" "$HERE/breakdown.py" --out "$RES" ;;
		gmlake) GMLAKE=1 "$PY" "$HERE/breakdown.py" --out "$RES" ;;
		esac 2>&1 | grep -v '^BREAKDOWN' | tail -6
	done
done
# The Go layers (the engine's hot path needs no driver call for a cached block: the simulated device here).
GO=$OUT/go-bench.txt
: >"$GO"
for b in "impl:BenchmarkAllocFree$/gmlake/" "serve:BenchmarkServeAllocFree" "clib:BenchmarkCLibAllocFree"; do
	bin=${b%%:*}
	(cd "$REPO" && "$PERF/$bin.test" -test.run '^$' -test.bench "${b#*:}" -test.benchtime 2000000x -test.count 3 -test.benchmem) | grep '^Benchmark' | tee -a "$GO"
done
"$PY" "$HERE/breakdown_table.py" "$RES" "$GO" | tee "$OUT/breakdown.md"
