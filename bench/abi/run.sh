#!/usr/bin/env bash
# The C side of the per-pair breakdown on the simulated device (any machine) or the GPU (GMLAKE_DEVICE=cuda),
# beside the Go layers below the ABI (docs/results/hotpath-breakdown.md):
#   bench/abi/run.sh [LIB]          ns per pair through the C ABI, per two no-op crossings, and the Go layers
#   PERF=1 bench/abi/run.sh [LIB]   also `perf record` of the 1 MiB pair alone, grouped by layer (perf_groups.py)
# LIB: a libgmlake.so (default: make capi's). Thread CPU time, best of 5: load on the machine barely moves it.
set -euo pipefail
cd "$(dirname "$0")/../.."
LIB=${1:-capi/libgmlake.so}
[ -f "$LIB" ] || make capi
dir=$(cd "$(dirname "$LIB")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/pair
gcc -O2 -g -o "$bin" bench/abi/pair.c -Icapi -L"$dir" -lgmlake -Wl,-rpath,"$dir" -lpthread
export GMLAKE_DEVICE=${GMLAKE_DEVICE:-sim} GMLAKE_SIM_CAPACITY=${GMLAKE_SIM_CAPACITY:-140GiB}
"$bin" "${PAIRS:-1000000}"
if [ -n "${PERF:-}" ]; then
	perf record -q -F 4000 -o "$tmp/perf.data" "$bin" "${PAIRS:-1000000}" 1048576
	perf report -i "$tmp/perf.data" --no-children --sort symbol 2>/dev/null | grep '%' | grep -v '^#' |
		python3 bench/abi/perf_groups.py
fi
go test -run '^$' -bench 'BenchmarkCLibAllocFree' -benchtime 1000000x -count 3 ./impl/clib | grep '^Benchmark'
go test -run '^$' -bench 'BenchmarkServeAllocFree' -benchtime 1000000x -count 3 ./impl/serve | grep '^Benchmark'
go test -run '^$' -bench 'BenchmarkAllocFree$/^gmlake$/' -benchtime 1000000x -count 3 ./impl | grep '^Benchmark'
