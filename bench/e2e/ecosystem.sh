#!/usr/bin/env bash
# The PyTorch ecosystem table of issue 15 on the GPU machine: bench/e2e/ecosystem.py under native,
# expandable_segments and gmlake (each allocator in its own processes), the timed training job (train.py ckpt),
# and the hot path (microbench.py), then one table (ecosystem_table.py). gmlake is installed from the wheel
# (make wheel; carry dist/) and enabled with no code change: `python3 -m gmlake_torch SCRIPT`.
#
#   bash bench/e2e/ecosystem.sh                 # OUT=$OUT; about 7 minutes on an H200
#   GROUPS_="stats,graphs" ALLOCS="native gmlake" bash bench/e2e/ecosystem.sh
#
# Knobs: OUT, ALLOCS, GROUPS_ (space-separated groups of comma-separated tests, one process per group), TRAIN
# (1: the ckpt training job), MICRO (1: microbench.py), PYLOOP (extra torch.empty+del processes per allocator),
# STEPS, DEADLINE_S (starts nothing after it; 560).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$REPO/out/eco}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
ALLOCS=${ALLOCS:-"native expandable gmlake"}
GROUPS_=${GROUPS_:-"stats,pyloop,graphs,compile,snapshot,cudnn hf,accel,lightning,maxseq"}
TRAIN=${TRAIN:-1}
MICRO=${MICRO:-1}
STEPS=${STEPS:-10}
DEADLINE_S=${DEADLINE_S:-560}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE_LIB
T0=$(date +%s)
LOG=$OUT/eco.log
say() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - T0))s] $*" | tee -a "$LOG"; }
left() { echo $((DEADLINE_S - ($(date +%s) - T0))); }

# Install the wheel into the machine's Python, as a user would (no network: --no-index).
WHL=$(ls "$REPO"/dist/gmlake_torch-*.whl 2>/dev/null | head -1)
if [ -z "$WHL" ]; then
	say "FATAL: no dist/gmlake_torch-*.whl: run 'make wheel' on the build machine and carry dist"
	exit 2
fi
"$PY" -m pip install -q --no-index --no-deps --force-reinstall "$WHL" 2>&1 | tail -3 | tee -a "$LOG"
(cd / && GMLAKE_VERBOSE=1 "$PY" -c 'import gmlake_torch, torch; print("mode", gmlake_torch.enable(), gmlake_torch.__file__); torch.ones(1, device="cuda"); print("backend", torch.cuda.get_allocator_backend())') 2>&1 | tail -5 | tee -a "$LOG"

# run ALLOC CMD...: one process under ALLOC's environment (gmlake: through python -m gmlake_torch).
run() {
	local alloc=$1
	shift
	local l
	l=$(left)
	if [ "$l" -lt 20 ]; then
		say "skip $alloc $*: past the deadline"
		return 0
	fi
	local pre=(env -u PYTORCH_CUDA_ALLOC_CONF) py=("$PY")
	[ "$alloc" = expandable ] && pre=(env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
	[ "$alloc" = gmlake ] && py=("$PY" -m gmlake_torch)
	[ "$alloc" = gmlake-pluggable ] && pre=(env -u PYTORCH_CUDA_ALLOC_CONF GMLAKE_MODE=pluggable) && py=("$PY" -m gmlake_torch)
	say "start $alloc $*"
	ECO_ALLOC=$alloc "${pre[@]}" timeout -k 5 "$l" "${py[@]}" "$@" >>"$LOG" 2>&1
	say "end $alloc: exit $?"
}

for g in $GROUPS_; do
	for a in $ALLOCS; do
		run "$a" "$HERE/ecosystem.py" --alloc "$a" --tests "$g" --out "$OUT/eco.jsonl"
	done
done
# The per-tensor cost differs by a few hundred ns from one process to the next: PYLOOP more processes of each,
# interleaved; the table takes the best of each allocator.
for i in $(seq 1 "${PYLOOP:-0}"); do
	for a in $ALLOCS gmlake-pluggable; do
		run "$a" "$HERE/ecosystem.py" --alloc "$a" --tests pyloop --out "$OUT/eco.jsonl"
	done
done
if [ "$TRAIN" = 1 ]; then
	for a in $ALLOCS; do
		run "$a" "$HERE/train.py" --config ckpt --alloc "$a" --steps "$STEPS" --warmup 3 --out "$OUT/train.jsonl"
	done
fi
if [ "$MICRO" = 1 ]; then
	for a in $ALLOCS; do
		run "$a" "$HERE/microbench.py" --pairs 100000 --repeat 2 --out "$OUT/micro.jsonl"
	done
fi
"$PY" "$HERE/ecosystem_table.py" "$OUT" | tee "$OUT/table.md"
