#!/usr/bin/env bash
# The C side of the per-pair breakdown on the simulated device (any machine) or the GPU (GMLAKE_DEVICE=cuda),
# beside the Go layers below the ABI: bench/abi/run.sh [LIB]  (LIB: a libgmlake.so; default: make capi's)
set -euo pipefail
cd "$(dirname "$0")/../.."
LIB=${1:-capi/libgmlake.so}
[ -f "$LIB" ] || make capi
dir=$(cd "$(dirname "$LIB")" && pwd)
bin=$(mktemp -d)/pair
gcc -O2 -o "$bin" bench/abi/pair.c -Icapi -L"$dir" -lgmlake -Wl,-rpath,"$dir" -lpthread
GMLAKE_DEVICE=${GMLAKE_DEVICE:-sim} GMLAKE_SIM_CAPACITY=${GMLAKE_SIM_CAPACITY:-4GiB} "$bin" "${PAIRS:-1000000}"
go test -run '^$' -bench 'BenchmarkCLibAllocFree' -benchtime 1000000x -count 3 ./impl/clib | grep '^Benchmark'
go test -run '^$' -bench 'BenchmarkServeAllocFree' -benchtime 1000000x -count 3 ./impl/serve | grep '^Benchmark'
go test -run '^$' -bench 'BenchmarkAllocFree$/^gmlake$/' -benchtime 1000000x -count 3 ./impl | grep '^Benchmark'
