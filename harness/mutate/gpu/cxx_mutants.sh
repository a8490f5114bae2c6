#!/usr/bin/env bash
# The C++ allocator's mutants judged on a GPU machine (issue 39 item 1): for each mutated source that
# emit.sh made here, a copy of the installed gmlake_torch with that source, built by the package's own build
# (GMLAKE_MODE=cpp: a build failure is "invalid", never a silent pluggable fallback), then three checkers, each
# in its own process, as a user runs them:
#   smoke   bench/e2e/smoke.py (data through gmlake, record_stream, empty_cache, fraction, OOM, trace, stats)
#   eco     bench/e2e/ecosystem.py's stats and graphs tests under `python -m gmlake_torch`: each must pass,
#           and every figure of stats must equal the unmutated build's (which gives native's answers)
#   suite   PyTorch's own allocator tests (bench/torch/pytorch_suite) under GMLAKE=1: a test that passed on the
#           unmutated build and fails on the mutant kills it
#   ipc     bench/e2e/fork_ipc_probe.py under GMLAKE=1 (fork; CUDA IPC of three sizes and a stitched block; no
#           leak in either process): run one job at a time after the others, since it reads the device's free
#           memory
# Job 000 is the unmutated source, run in the same pool and conditions (its failures are not held against a
# mutant). Jobs run P at a time (one GPU; each job's memory is small). Results: $OUT/NNN/ per job, and
# $OUT/cxx-mutants.jsonl + table (cxx_table.py).
#   make wheel; harness/mutate/gpu/emit.sh KEYS out/cxx       # here
#   OUT=$OUT bash harness/mutate/gpu/cxx_mutants.sh out/cxx   # on the GPU machine, carry dist and out/cxx
# DEADLINE_S (default 540) stops starting jobs; ONLY="003 007" runs those jobs alone (and 000).
set -uo pipefail
MDIR=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT=${OUT:-/tmp/cxxmut}
PY=${PYTHON:-python3}
P=${P:-3}
T0=$(date +%s)
DEADLINE=$((T0 + ${DEADLINE_S:-540}))
mkdir -p "$OUT"
WHL=$(ls "$REPO"/dist/gmlake_torch-*.whl 2>/dev/null | head -1)
[ -n "$WHL" ] || { echo "cxx_mutants.sh: no wheel in dist/ (make wheel here, carry dist)" >&2; exit 2; }
"$PY" -m pip install -q --no-index --no-deps --force-reinstall "$WHL" 2>&1 | tail -2
PKG=$(cd / && "$PY" -c 'import gmlake_torch, os; print(os.path.dirname(gmlake_torch.__file__))')
TO=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TO=(--timeout 60)
say() { echo "[$(($(date +%s) - T0))s] $*"; }
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE

job() { # job NNN SOURCE
	local n=$1 src=$2 d=$OUT/$1 w=/tmp/cxxmut-work/$1
	rm -rf "$w" "$d"
	mkdir -p "$w/python" "$w/bench" "$d"
	cp -r "$PKG" "$w/python/gmlake_torch"
	cp -r "$REPO/bench/e2e" "$REPO/bench/torch" "$w/bench/"
	cp "$src" "$w/python/gmlake_torch/csrc/gmlake_allocator.cc"
	export PYTHONPATH=$w/python:$w/bench/torch/pytorch_suite GMLAKE_CACHE=$w/cache GMLAKE_MODE=cpp \
		PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
	local t=$(date +%s)
	if ! (cd "$w" && timeout 300 "$PY" -c '
import gmlake_torch as g, torch, sys
g.enable()
assert g.mode() == "cpp", g.mode()
assert g.__file__.startswith(sys.argv[1]), g.__file__
torch.ones(1, device="cuda")
print("built", g.__file__)' "$w/python") >"$d/build.log" 2>&1; then
		echo invalid >"$d/status"
		return
	fi
	echo "$(($(date +%s) - t))" >"$d/build_s"
	t=$(date +%s)
	(cd "$w" && timeout 120 "$PY" bench/e2e/smoke.py --out "$d/smoke.jsonl") >"$d/smoke.log" 2>&1
	echo "$? $(($(date +%s) - t))" >"$d/smoke.rc"
	t=$(date +%s)
	(cd "$w" && timeout 180 "$PY" -m gmlake_torch bench/e2e/ecosystem.py --alloc gmlake --tests stats,graphs \
		--out "$d/eco.jsonl") >"$d/eco.log" 2>&1
	echo "$? $(($(date +%s) - t))" >"$d/eco.rc"
	t=$(date +%s)
	(cd "$w/bench/torch/pytorch_suite" && GMLAKE=1 timeout -k 10 240 "$PY" -m pytest -q -p no:cacheprovider "${TO[@]}" \
		-o junit_family=xunit1 --junitxml="$d/suite.xml" test_cuda_allocator.py) >"$d/suite.log" 2>&1
	echo "$? $(($(date +%s) - t))" >"$d/suite.rc"
	echo done >"$d/status"
}

ipc() { # ipc NNN: after the pool, one at a time (the probe reads the device's free memory)
	local n=$1 d=$OUT/$1 w=/tmp/cxxmut-work/$1
	[ "$(cat "$d/status" 2>/dev/null)" = done ] || return 0
	local t=$(date +%s)
	(cd "$w" && PYTHONPATH=$w/python GMLAKE_CACHE=$w/cache GMLAKE_MODE=cpp GMLAKE=1 timeout 150 "$PY" \
		bench/e2e/fork_ipc_probe.py) >"$d/ipc.jsonl" 2>"$d/ipc.log"
	echo "$? $(($(date +%s) - t))" >"$d/ipc.rc"
	rm -rf "$w"
}

jobs_list=("000 $REPO/python/gmlake_torch/csrc/gmlake_allocator.cc")
while IFS=$'\t' read -r n file key; do
	[ -f "$MDIR/$n-$(basename "$file")" ] || continue # invalid here (precheck.tsv)
	if [ -n "${ONLY:-}" ] && ! [[ " $ONLY " == *" $n "* ]]; then continue; fi
	jobs_list+=("$n $MDIR/$n-$(basename "$file")")
done <"$MDIR/mutants.tsv"
say "${#jobs_list[@]} jobs (000 = the unmutated source), $P at a time"
running=0
for j in "${jobs_list[@]}"; do
	if [ "$(date +%s)" -ge "$DEADLINE" ]; then
		say "deadline: job ${j%% *} and later not started"
		break
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$P" ]; do sleep 2; done
	say "start ${j%% *}"
	(job $j; say "end ${j%% *}: $(cat "$OUT/${j%% *}/status" 2>/dev/null)") &
done
wait
for j in "${jobs_list[@]}"; do
	if [ "$(date +%s)" -ge "$((DEADLINE + ${IPC_EXTRA_S:-40}))" ]; then
		say "deadline: no ipc probe for ${j%% *} and later"
		break
	fi
	ipc "${j%% *}"
	say "ipc ${j%% *}: $(cat "$OUT/${j%% *}/ipc.rc" 2>/dev/null)"
done
cp "$MDIR/mutants.tsv" "$MDIR/precheck.tsv" "$OUT/" 2>/dev/null
"$PY" "$HERE/cxx_table.py" "$OUT" | tee "$OUT/table.md"
