#!/usr/bin/env bash
# The end-to-end GPU benchmark of gmlake in PyTorch (issue 8; docs/pytorch.md). Runs on the GPU machine
# (torch, transformers, peft; no Go there: build capi/libgmlake.so with `make capi` first and bring it along).
#
#   bench/e2e/run.sh                                   # every single-GPU phase (about 8 minutes on an H200)
#                                                      # (stops starting runs after DEADLINE_S=570 s)
#   PHASES="check micro ckpt lora" bench/e2e/run.sh    # a subset; phases run in the order given
#   PHASES="check fsdp ddp" bench/e2e/run.sh           # FSDP2, DDP on NPROC=2 GPUs (torchrun; any NPROC works)
#   NPROC=1 PROFILE=2 PHASES=fsdp bench/e2e/run.sh     # FSDP2 over a world of one, profiled (issue 16):
#                                                      # $OUT/fsdp-profile.md, about 4 minutes on an H200
#
# Phases: check (the library loads into torch; smoke test on the GPU), micro (hot path in C++, PyTorch's
# allocator native and with expandable_segments), ckpt / lora / fsdp (the timed training job under each
# allocator, one process per run; fsdp and ddp: one torchrun of NPROC processes per run), maxbatch (largest batch per allocator, config $MAXBATCH_CONFIG), record
# (a gmlake run of the ckpt job that writes its allocation trace with gmlake_torch.record()).
# Results: $OUT/e2e.jsonl (one JSON object per run, written as each run ends), $OUT/summary.md (tables and
# targets, also printed), $OUT/run.log (everything printed). Knobs (environment): OUT, PHASES, ALLOCS, STEPS,
# WARMUP, RUN_TIMEOUT (s per run), MAXBATCH_CONFIG, BUDGET_GIB, NPROC, GMLAKE_POLICY, GMLAKE_LIB, PROFILE (fsdp:
# profile that many extra steps, count calls per step, time gmlake's driver calls; fsdp_profile_table.py).
# Multi-node: run the fsdp phase's torchrun line on every node with --nnodes/--node-rank/--rdzv-* instead of
# --standalone (docs/pytorch.md).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$REPO/out/e2e}
mkdir -p "$OUT"
RESULTS=$OUT/e2e.jsonl
LOG=$OUT/run.log
PHASES=${PHASES:-"check ckpt lora micro maxbatch record"}
ALLOCS=${ALLOCS:-"native expandable gmlake"}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
# Stop starting runs after DEADLINE_S seconds (a run in flight is cut at the deadline), so that a command
# with a hard wall-clock limit (the device tool's 600 s) still ends with its summary written.
DEADLINE_S=${DEADLINE_S:-570}
MAXBATCH_CONFIG=${MAXBATCH_CONFIG:-ckpt}
BUDGET_GIB=${BUDGET_GIB:-20}
NPROC=${NPROC:-2}
PROFILE=${PROFILE:-0}
PY=${PYTHON:-python3}

export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export GMLAKE_LIB=${GMLAKE_LIB:-$REPO/capi/libgmlake.so}
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# NVLink multicast stays off on the lent machines (KINDS.md): keep these set for every child, torchrun too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTORCH_CUDA_ALLOC_CONF

T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - T0))s] $*" | tee -a "$LOG"; }

# run_one KIND CONFIG ALLOC CMD...: runs one benchmark process under ALLOC's environment, with a timeout,
# its output appended to the log. If it died without writing its result line, writes one that says so.
run_one() {
	local kind=$1 config=$2 alloc=$3
	shift 3
	local before after rc limit envs=(env -u PYTORCH_CUDA_ALLOC_CONF)
	[ "$alloc" = expandable ] && envs=(env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
	limit=$((DEADLINE_S - ($(date +%s) - T0)))
	if [ "$limit" -lt 30 ]; then
		say "skip $kind $config $alloc: past the deadline (DEADLINE_S=$DEADLINE_S)"
		return 0
	fi
	[ "$limit" -gt "$RUN_TIMEOUT" ] && limit=$RUN_TIMEOUT
	before=$(wc -l <"$RESULTS" 2>/dev/null || echo 0)
	say "start $kind $config $alloc: $*"
	set +e
	"${envs[@]}" timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG" | grep -E '^(RESULT|MICRO|SMOKE) |step [0-9]+ |PROBE|Error|error' | cut -c1-400
	rc=${PIPESTATUS[0]}
	set -e
	after=$(wc -l <"$RESULTS" 2>/dev/null || echo 0)
	if [ "$after" -le "$before" ]; then
		"$PY" -c 'import json,sys; print(json.dumps(dict(kind=sys.argv[1], config=sys.argv[2], alloc=sys.argv[3], ok=False, error="process exited with status %s (124: timeout) before writing a result; see run.log" % sys.argv[4])))' \
			"$kind" "$config" "$alloc" "$rc" >>"$RESULTS"
	fi
	say "end $kind $config $alloc: exit $rc"
}

say "gmlake e2e benchmark: phases [$PHASES], allocators [$ALLOCS], out $OUT"
if [ ! -f "$GMLAKE_LIB" ]; then
	say "FATAL: $GMLAKE_LIB not found: run 'make capi' on the build machine and carry capi/libgmlake.so"
	exit 2
fi
ngpu=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>>"$LOG" || echo 0)
say "python $("$PY" -c 'import sys; print(sys.version.split()[0])'), $ngpu GPU(s), library $GMLAKE_LIB"

for phase in $PHASES; do
	case $phase in
	check)
		# gmlake inside PyTorch on the GPU; on failure once more in the pluggable fallback, then without gmlake.
		run_one smoke smoke gmlake "$PY" "$HERE/smoke.py" --out "$RESULTS"
		if ! tail -n 1 "$RESULTS" | grep -q '"ok": true'; then
			say "smoke test FAILED; again in the pluggable fallback (GMLAKE_MODE=pluggable)"
			GMLAKE_MODE=pluggable run_one smoke smoke-pluggable gmlake "$PY" "$HERE/smoke.py" --out "$RESULTS"
			if tail -n 1 "$RESULTS" | grep -q '"ok": true'; then
				export GMLAKE_MODE=pluggable
				say "continuing with GMLAKE_MODE=pluggable"
			else
				say "smoke test FAILED twice: continuing with native/expandable only"
				ALLOCS=$(echo "$ALLOCS" | tr ' ' '\n' | grep -v '^gmlake$' | tr '\n' ' ')
			fi
		fi
		;;
	micro)
		run_one micro micro native "$PY" "$HERE/microbench.py" --out "$RESULTS"
		run_one micro micro expandable "$PY" "$HERE/microbench.py" --out "$RESULTS"
		;;
	ckpt | lora)
		for alloc in $ALLOCS; do
			run_one train "$phase" "$alloc" "$PY" "$HERE/train.py" --config "$phase" --alloc "$alloc" \
				--steps "$STEPS" --warmup "$WARMUP" --out "$RESULTS"
		done
		;;
	fsdp | ddp)
		if [ "$NPROC" -lt 1 ] || [ "$ngpu" -lt "$NPROC" ]; then
			say "skip $phase: $ngpu GPU(s), NPROC=$NPROC needed (NPROC=1 runs over a world of one)"
			continue
		fi
		prof=()
		if [ "$PROFILE" -gt 0 ]; then
			prof=(--profile "$PROFILE")
			export GMLAKE_TIME_DRIVER=1 # gmlake_torch.stats()' driver_seconds by kind
		fi
		for alloc in $ALLOCS; do
			[ "$PROFILE" -gt 0 ] && prof=(--profile "$PROFILE" --profile-trace "$OUT/$phase-$alloc.trace.json.gz")
			run_one train "$phase" "$alloc" torchrun --standalone --nproc_per_node "$NPROC" "$HERE/train.py" \
				--config "$phase" --alloc "$alloc" --steps "$STEPS" --warmup "$WARMUP" "${prof[@]}" --out "$RESULTS"
		done
		if [ "$PROFILE" -gt 0 ]; then
			"$PY" "$HERE/fsdp_profile_table.py" "$RESULTS" --config "$phase" | tee "$OUT/$phase-profile.md" | tee -a "$LOG" || true
		fi
		;;
	maxbatch)
		for alloc in $ALLOCS; do
			run_one maxbatch "$MAXBATCH_CONFIG" "$alloc" "$PY" "$HERE/train.py" --config "$MAXBATCH_CONFIG" \
				--alloc "$alloc" --maxbatch --budget-gib "$BUDGET_GIB" --out "$RESULTS"
		done
		;;
	record)
		case " $ALLOCS " in *" gmlake "*) ;; *)
			say "skip record: gmlake is not among the allocators"
			continue
			;;
		esac
		run_one record ckpt gmlake "$PY" "$HERE/train.py" --config ckpt --alloc gmlake --steps 6 --warmup 2 \
			--trace "$OUT/ckpt-gmlake.trace.gz" --out "$RESULTS"
		;;
	*)
		say "unknown phase $phase (phases: check micro ckpt lora fsdp ddp maxbatch record)"
		;;
	esac
	"$PY" "$HERE/summarize.py" "$RESULTS" --md "$OUT/summary.md" >/dev/null 2>>"$LOG" || true
done

say "done in $(($(date +%s) - T0)) s"
"$PY" "$HERE/summarize.py" "$RESULTS" --md "$OUT/summary.md" | tee -a "$LOG"
