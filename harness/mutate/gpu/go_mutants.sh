#!/usr/bin/env bash
# The real driver's mutants (emit_go.sh's DIR) judged on the GPU (issue 39 item 1): for each job NNN (000: the
# unmutated build, in the same pool and conditions), three checkers, each its own test binary run in its
# package's folder:
#   cudavmm      impl/cudavmm's own tests (the VMM rules on the GPU, handles, export, many goroutines)
#   conformance  TestConformanceReal (random legal and illegal call sequences, GPU against the model, every
#                answer and byte read back) and TestEngineIntegrityReal (every policy, patterns checked)
#   gpu          TestRapidOnGPU and TestLinearizableOnGPU (rapid and porcupine through the serving layer on
#                the real driver)
# A checker kills a mutant when it fails (or times out) where 000 passed. P jobs at a time (default 3).
#   OUT=$OUT bash harness/mutate/gpu/go_mutants.sh DIR      # DEADLINE_S (default 480) stops starting jobs
set -uo pipefail
MDIR=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT=${OUT:-/tmp/gomut}
P=${P:-3}
T0=$(date +%s)
DEADLINE=$((T0 + ${DEADLINE_S:-480}))
mkdir -p "$OUT"
say() { echo "[$(($(date +%s) - T0))s] $*"; }
check() { # check NNN NAME PKGDIR CMD...: one checker, its rc and seconds in $OUT/NNN/NAME.rc
	local n=$1 name=$2 pkg=$3
	shift 3
	local t=$(date +%s)
	(cd "$REPO/$pkg" && GMLAKE_GPU_OUT=$OUT/$n timeout -k 5 "${CHECK_TIMEOUT_S:-200}" "$@") >"$OUT/$n/$name.log" 2>&1
	echo "$? $(($(date +%s) - t))" >"$OUT/$n/$name.rc"
}
job() {
	local n=$1 b=/tmp/gomut-bin/$1
	mkdir -p "$OUT/$n" "$b"
	if [ -f "$MDIR/$n/invalid" ]; then
		echo invalid >"$OUT/$n/status"
		return
	fi
	for t in cudavmm conformance gpu; do xz -dc "$MDIR/$n/$t.test.xz" >"$b/$t.test" && chmod +x "$b/$t.test"; done
	check "$n" cudavmm impl/cudavmm "$b/cudavmm.test" -test.v -test.timeout 180s
	check "$n" conformance harness/conformance "$b/conformance.test" -test.v -test.run 'TestConformanceReal$|TestEngineIntegrityReal$' -test.timeout 180s
	check "$n" gpu harness/gpu "$b/gpu.test" -test.v -test.run 'TestRapidOnGPU$|TestLinearizableOnGPU$' -rapid.checks=200 -gpu.histories=50 -test.timeout 180s
	echo done >"$OUT/$n/status"
	rm -rf "$b"
}
list=(000)
while IFS=$'\t' read -r n file key; do list+=("$n"); done <"$MDIR/mutants.tsv"
say "${#list[@]} jobs (000 = the unmutated build), $P at a time"
for n in "${list[@]}"; do
	if [ "$(date +%s)" -ge "$DEADLINE" ]; then say "deadline: $n and later not started"; break; fi
	while [ "$(jobs -rp | wc -l)" -ge "$P" ]; do sleep 2; done
	say "start $n"
	(job "$n"; say "end $n: $(cat "$OUT/$n/status") $(cat "$OUT/$n"/*.rc 2>/dev/null | tr '\n' ' ')") &
done
wait
cp "$MDIR/mutants.tsv" "$OUT/"
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, os, sys
out = sys.argv[1]
def rc(n, c):
    try:
        return int(open(os.path.join(out, n, c + ".rc")).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
keys = dict(l.rstrip("\n").split("\t")[0::2] for l in open(os.path.join(out, "mutants.tsv")))
cs = ("cudavmm", "conformance", "gpu")
base = {c: rc("000", c) for c in cs}
print("000 (unmutated): " + ", ".join("%s rc=%s" % (c, base[c]) for c in cs))
print("| # | mutant | killed by |\n|---|---|---|")
rows, done = [], []
for n in sorted(keys):
    st = open(os.path.join(out, n, "status")).read().strip() if os.path.exists(os.path.join(out, n, "status")) else "not run"
    r = dict(n=n, key=keys[n], status=st)
    if st == "done":
        r["killed_by"] = [c for c in cs if base[c] == 0 and rc(n, c) != 0]
        done.append(r)
    rows.append(r)
    print("| %s | `%s` | %s |" % (n, keys[n], ", ".join(r.get("killed_by", [])) or ("**survived**" if st == "done" else st)))
with open(os.path.join(out, "go-mutants.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
k = [r for r in done if r["killed_by"]]
two = [r for r in done if len(r["killed_by"]) >= 2]
if done:
    print("\n%d run: %d killed (%.0f%%), %d by two checkers or more; per checker: %s" % (len(done), len(k), 100.0 * len(k) / len(done),
          len(two), ", ".join("%s %d" % (c, sum(c in r["killed_by"] for r in done)) for c in cs)))
PY
