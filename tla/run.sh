#!/usr/bin/env bash
# tla/run.sh: check the Quint spec of virtual memory stitching and drive the engine with its traces.
#
#   ./tla/run.sh ci     typecheck, unit tests (quint test), random simulation with every invariant, the seeded
#                       bugs found, ITF traces generated and replayed through the engine in lockstep (go test -run ITF).
#                       `make test` runs it (make tla). About 2-3 minutes on 2 cores, npm ci included.
#   ./tla/run.sh long   the same with many more traces and longer ones (`make verify`).
#   The simulation runs vms_ci (cached sBlocks torn down at any step: the invariants over every StitchFree
#   order) and vms_itf (torn down where the engine does: its traces drive the engine in lockstep).
#   ./tla/run.sh gen    regenerate the committed traces in harness/testdata/itf (then review and commit them).
#
# Quint comes from npm, pinned in tla/package.json + package-lock.json (with the antlr4ts override it needs
# to start); `npm ci` installs it into tla/node_modules (git-ignored) when that is missing. The simulator
# runs with --backend typescript: offline, no binary download. Environment: SEED (simulation seed, default
# fixed in ci, random in long), GO (default go).
set -euo pipefail

mode=${1:-ci}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
GO=${GO:-go}
cd "$here"

if [[ ! -x node_modules/.bin/quint ]]; then
	command -v npm >/dev/null || { echo "tla/run.sh: npm not found: install Node.js 18+ and npm" >&2; exit 1; }
	echo "== npm ci (installing the pinned Quint into tla/node_modules)"
	npm ci --no-audit --no-fund --loglevel=error
fi
quint() { node_modules/.bin/quint "$@"; }

invariants=(INV_NOOVERLAP INV_MAPPED INV_NOALIAS INV_REFCOUNT INV_STATS INV_NOLEAK INV_STREAM INV_RELEASESAFE INV_NOSPURIOUSOOM C_FREE_KIND INV_SBCACHE C_FORGET)
witnesses=(W_EXACT W_SPLIT W_REUSE W_STITCH W_GROWSTITCH W_GROW W_RELEASE W_OOM W_FAIL W_STITCHFREE W_EMPTYRELEASE W_CLOSE W_BADFREE W_CROSSSTREAM W_FORGET)

case "$mode" in
ci)
	samples=${SAMPLES:-200} itfsamples=${ITF_SAMPLES:-100} steps=${STEPS:-40} itf=${ITF_TRACES:-30} sbcsamples=${SBC_SAMPLES:-50} sbc=${SBC_TRACES:-20} seed=${SEED:-0x6d6c616b65}
	;;
long)
	samples=${SAMPLES:-2000} itfsamples=${ITF_SAMPLES:-1000} steps=${STEPS:-60} itf=${ITF_TRACES:-300} sbcsamples=${SBC_SAMPLES:-500} sbc=${SBC_TRACES:-200} seed=${SEED:-0x$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')}
	;;
gen)
	out="$root/harness/testdata/itf"
	rm -f "$out"/*.itf.json
	mkdir -p "$out"
	quint run vms.qnt --main vms_itf --backend typescript --seed "${SEED:-0x67656e}" --max-samples 6 --n-traces 6 \
		--max-steps 30 --mbt --out-itf "$out/vms_{seq}.itf.json" --invariants "${invariants[@]}" --verbosity 1
	# vms_sbc: of 30 traces, those where a free's LRU StitchFree tore a cached sBlock down (about 1 in 10)
	sbcdir=$(mktemp -d)
	quint run vms.qnt --main vms_sbc --backend typescript --seed "${SEED:-0x6d6c616b65}" --max-samples 30 --n-traces 30 \
		--max-steps 40 --mbt --out-itf "$sbcdir/vms_sbc_{seq}.itf.json" --invariants "${invariants[@]}" --verbosity 1
	grep -l '"torn":{"#bigint":"[1-9]' "$sbcdir"/*.itf.json | xargs -r cp -t "$out"
	rm -rf "$sbcdir"
	ls -l "$out"
	exit 0
	;;
*)
	echo "usage: tla/run.sh ci|long|gen" >&2
	exit 2
	;;
esac

t0=$SECONDS
echo "== quint typecheck"
quint typecheck vms.qnt
quint typecheck vms_buggy.qnt

echo "== quint test (unit tests of every action and allocation case)"
quint test vms_test.qnt --main vms_test --backend typescript --max-samples 1 --verbosity 1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# vms_ci tears cached sBlocks down at any step (every order the engine's LRU rule could take: the
# invariants over that); vms_itf only where the engine does (EmptyCache, the out-of-memory release): its
# traces drive the engine in lockstep; vms_sbc is the engine with a cache of one sBlock (the LRU StitchFree
# at a free, INV_SBCACHE): its traces drive the engine with that cache.
echo "== quint run: $samples random traces of vms_ci (any StitchFree), $itfsamples of vms_itf and $sbcsamples of vms_sbc (an sBlock cache of 1), up to $steps steps, every invariant (seed $seed); $itf of vms_itf and $sbc of vms_sbc written as ITF"
set +e
quint run vms.qnt --main vms_ci --backend typescript --seed "$seed" --max-samples "$samples" --max-steps "$steps" \
	--invariants "${invariants[@]}" --witnesses "${witnesses[@]}" --verbosity 2 >"$work/sim.log" 2>&1 &&
	quint run vms.qnt --main vms_itf --backend typescript --seed "$seed" --max-samples "$itfsamples" --max-steps "$steps" \
		--n-traces "$itf" --mbt --out-itf "$work/vms_{seq}.itf.json" \
		--invariants "${invariants[@]}" --verbosity 2 >"$work/sim_itf.log" 2>&1 &&
	quint run vms.qnt --main vms_sbc --backend typescript --seed "$seed" --max-samples "$sbcsamples" --max-steps "$steps" \
		--n-traces "$sbc" --mbt --out-itf "$work/vms_sbc_{seq}.itf.json" \
		--invariants "${invariants[@]}" --witnesses W_TRIM W_FORGET W_REUSE --verbosity 2 >"$work/sim_sbc.log" 2>&1
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
	cat "$work/sim.log" >&2
	[[ -f "$work/sim_itf.log" ]] && cat "$work/sim_itf.log" >&2
	[[ -f "$work/sim_sbc.log" ]] && cat "$work/sim_sbc.log" >&2
	echo "FAIL: an invariant of vms.qnt is violated (the trace is above; reproduce with the seed it prints)" >&2
	exit 1
fi
grep -E '^\[ok\]|Trace length|witnessed' "$work/sim.log" | sed 's/^/   vms_ci: /'
grep -E '^\[ok\]|Trace length' "$work/sim_itf.log" | sed 's/^/   vms_itf: /'
grep -E '^\[ok\]|Trace length|witnessed' "$work/sim_sbc.log" | sed 's/^/   vms_sbc: /'
n=$(ls "$work"/*.itf.json | wc -l)
st=$(cat "$work"/*.itf.json | grep -o '"#meta":{"index"' | wc -l)
echo "   wrote $n ITF traces ($st states)"

echo "== seeded bugs in the spec: each must be found by simulation as a violation of its invariant"
for b in alias:INV_NOALIAS early:INV_STREAM nostitch:INV_NOSPURIOUSOOM refcount:INV_REFCOUNT stats:INV_STATS badfree:C_FREE_KIND sbcache:INV_SBCACHE forget:C_FORGET; do
	bug=${b%%:*} inv=${b##*:}
	set +e
	outp=$(quint run vms_buggy.qnt --main "vms_bug_$bug" --backend typescript --seed "$seed" --max-samples 300 \
		--max-steps "$steps" --invariant "$inv" --verbosity 1 2>&1)
	rc=$?
	set -e
	if [[ $rc -eq 0 ]] || ! grep -q '\[violation\]' <<<"$outp"; then
		echo "FAIL: seeded bug '$bug' was not caught by $inv (rc=$rc):" >&2
		echo "$outp" >&2
		exit 1
	fi
	echo "   bug $bug: caught by $inv"
done

echo "== ITF conformance: the engine driven by the spec's traces (harness, TestITF*)"
cd "$root"
set +e
outp=$(GMLAKE_ITF_DIR="$work" $GO test -count=1 -run 'TestITF' -v ./harness/ 2>&1)
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
	echo "$outp" | grep -v '^=== RUN\|^    --- PASS' >&2
	echo "FAIL: ITF conformance (the failing traces are in $work, kept)" >&2
	trap - EXIT
	exit 1
fi
grep -E 'ITF conformance:|^ok' <<<"$outp"

echo "== tla $mode: passed in $((SECONDS - t0)) s ($samples + $itfsamples + $sbcsamples traces x $steps steps simulated, $n traces replayed)"
