#!/usr/bin/env bash
# bench/gpu/run.sh: every GPU measurement the issues ask for, batched for the 2-GPU machine (nvidia-h200-x2).
# Build here first: `make gpu capi` (bin/ and capi/libgmlake.so are git-ignored: carry them).
#
#   bench/gpu/run.sh a   GPU 0: the PyTorch end-to-end benchmark (bench/e2e, single-GPU phases);
#                        GPU 1: a 5-minute fuzz campaign per policy, the four in parallel.       (~9.5 min)
#   bench/gpu/run.sh b   GPU 0: driver conformance + engine integrity, replay --device cuda, the cost probe;
#                        GPU 1: PyTorch's allocator hot path (bench/torch), then ours (impl benchmarks);
#                        then FSDP2 on both GPUs (bench/e2e fsdp).                                  (~8 min)
#   bench/gpu/run.sh c   one GPU, nothing else running: replay --device cuda (driver time by call kind), then
#                        the e2e ckpt and lora jobs for step times free of interference.           (~8 min)
# Results land in $OUT (default out/gpu): one file per measurement, logs beside them.
set -uo pipefail
mode=${1:?usage: bench/gpu/run.sh a|b}
cd "$(dirname "$0")/../.."
# The device tool brings back at most 8 files: work in $OUT/$mode and pack it into $OUT/gpu-$mode.tar.gz.
FINAL=${OUT:-out/gpu}
OUT=$FINAL/$mode
mkdir -p "$OUT"
trap 'tar -C "$FINAL" -czf "$FINAL/gpu-$mode.tar.gz" "$mode"; rm -rf "$OUT"' EXIT
export PYTHONUNBUFFERED=1
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv | tee "$OUT/gpus-$mode.txt"

case $mode in
a)
	say "e2e on GPU 0"
	(CUDA_VISIBLE_DEVICES=0 OUT="$OUT" PHASES="${PHASES:-check ckpt lora micro maxbatch}" DEADLINE_S=${DEADLINE_S:-540} \
		bash bench/e2e/run.sh >"$OUT/e2e.log" 2>&1; say "e2e done: $?") &
	say "fuzz campaigns on GPU 1"
	for p in gmlake caching expandable gmlake-paper; do
		(CUDA_VISIBLE_DEVICES=1 timeout -k 10 ${FUZZ_LIMIT:-380} bin/gmlake fuzz --device cuda --policy "$p" \
			--duration "${FUZZ_DURATION:-5m}" --streams 8 --seed 1 --capacity 20GiB --out "$OUT" \
			>"$OUT/fuzz-$p.json" 2>"$OUT/fuzz-$p.log"; say "fuzz $p exit $?") &
	done
	wait
	cat "$OUT"/fuzz-*.json
	;;
b)
	(
		export CUDA_VISIBLE_DEVICES=0
		say "conformance + integrity on GPU 0"
		(cd harness/conformance && timeout -k 10 150 ../../bin/conformance.test -test.run 'Conformance|Integrity' -test.v -test.count=1) \
			>"$OUT/conformance.txt" 2>&1
		say "conformance exit $?"
		timeout -k 10 200 bin/gmlake replay --device cuda --json "$OUT/replay-cuda.json" --plot "$OUT/replay-cuda.png" \
			testdata/traces/*.trace.gz >"$OUT/replay-cuda.txt" 2>"$OUT/replay-cuda.log"
		say "replay exit $?"
		timeout -k 10 90 bin/gmlake probe >"$OUT/probe.txt" 2>&1
		say "probe exit $?"
	) &
	(
		export CUDA_VISIBLE_DEVICES=1
		say "PyTorch hot path (native, expandable) then ours, same machine"
		timeout -k 10 200 python3 bench/torch/torch_alloc_bench.py >"$OUT/hotpath.txt" 2>"$OUT/hotpath-torch.log"
		PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout -k 10 120 python3 bench/torch/torch_alloc_bench.py \
			>>"$OUT/hotpath.txt" 2>>"$OUT/hotpath-torch.log"
		timeout -k 10 150 bin/impl.test -test.run '^$' -test.bench 'AllocFree' -test.benchmem -test.count 3 \
			-test.cpu 1 >>"$OUT/hotpath.txt" 2>&1
		say "hot path exit $?"
	) &
	wait
	say "FSDP2 on both GPUs"
	OUT="$OUT" PHASES="check fsdp" DEADLINE_S=${FSDP_DEADLINE_S:-240} bash bench/e2e/run.sh >"$OUT/fsdp.log" 2>&1
	say "fsdp exit $?"
	;;
c)
	say "replay on GPU 0 alone (measured vs modeled driver time, by call kind)"
	timeout -k 10 200 bin/gmlake replay --device cuda --json "$OUT/replay-cuda.json" --plot "$OUT/replay-cuda.png" \
		testdata/traces/*.trace.gz >"$OUT/replay-cuda.txt" 2>"$OUT/replay-cuda.log"
	say "replay exit $?"
	cat "$OUT/replay-cuda.txt"
	say "e2e single-GPU phases with nothing else on the machine (clean step times)"
	OUT="$OUT" PHASES="${PHASES:-check ckpt lora}" DEADLINE_S=${DEADLINE_S:-400} bash bench/e2e/run.sh >"$OUT/e2e.log" 2>&1
	say "e2e exit $?"
	cat "$OUT/summary.md"
	;;
esac
say "done"
