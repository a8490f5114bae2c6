#!/usr/bin/env bash
# nccl_one_gpu.py and fork_ipc_probe.py under native, expandable_segments and gmlake (the wheel in dist/,
# GMLAKE=1), the NCCL checks with and without TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK: JSON lines in
# $OUT/nccl.jsonl and $OUT/fork_ipc.jsonl, NCCL's registration log lines counted per run.
#   OUT=$OUT bash bench/e2e/nccl_one_gpu.sh      # carry dist
# PROBE_ALLOCATORS (default "native expandable gmlake") and PROBE_HOOKS (default "0 1") choose a subset.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/nccl_one_gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
"$PY" -m pip install -q --no-index --no-deps --force-reinstall "$(ls "$REPO"/dist/gmlake_torch-*.whl | head -1)" 2>&1 | tail -2
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE
export PYTHONUNBUFFERED=1
: >"$OUT/nccl.jsonl"
: >"$OUT/fork_ipc.jsonl"
for a in ${PROBE_ALLOCATORS:-native expandable gmlake}; do
	case $a in
	native) envs=() ;;
	expandable) envs=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
	gmlake) envs=(GMLAKE=1) ;;
	esac
	for hook in ${PROBE_HOOKS:-0 1}; do
		env "${envs[@]}" TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=$hook NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG \
			NCCL_DEBUG_FILE="$OUT/nccl-$a-$hook.%p.nccl" \
			timeout 240 "$PY" "$HERE/nccl_one_gpu.py" >"$OUT/nccl-$a-$hook.out" 2>"$OUT/nccl-$a-$hook.err"
		rc=$?
		grep '^{' "$OUT/nccl-$a-$hook.out" | sed "s/^{/{\"run\": \"$a hook=$hook\", \"rc\": $rc, /" >>"$OUT/nccl.jsonl"
		echo "$a hook=$hook rc=$rc NCCL registration lines: $(cat "$OUT"/nccl-$a-$hook.*.nccl 2>/dev/null | grep -ci 'regist')"
		cat "$OUT"/nccl-$a-$hook.*.nccl 2>/dev/null | grep -i 'regist' | head -5 | cut -c1-200
	done
	env "${envs[@]}" timeout 180 "$PY" "$HERE/fork_ipc_probe.py" >>"$OUT/fork_ipc.jsonl" 2>"$OUT/fork-$a.err"
	echo "$a fork/ipc rc=$?: $(tail -2 "$OUT/fork-$a.err" | cut -c1-300)"
done
cat "$OUT/nccl.jsonl" "$OUT/fork_ipc.jsonl"
