#!/usr/bin/env bash
# The C++ allocator's compile check without a GPU, a CUDA toolkit or torch (make cxx-check, part of make test):
# g++ -fsyntax-only -Wall -Werror of python/gmlake_torch/csrc/gmlake_allocator.cc with the flags
# gmlake_torch/_build.py compiles it with on a user's machine, against the torch 2.11 headers it includes (kept in
# torch-2.11/include, PyTorch's licence in LICENSE-pytorch) and a declaration-only stand-in for CUDA's headers
# (cudastub/). It catches what a user's import would otherwise meet first (a compile error makes gmlake_torch fall
# back to the pluggable allocator): a syntax or type error, a wrong override, a macro misuse. It does not catch
# an API torch's newer headers changed: refresh torch-2.11 from the torch the GPU machine has (README.md there).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CXX=${CXX:-g++}
SRC="$REPO/python/gmlake_torch/csrc/gmlake_allocator.cc"
check() { # check FILE: the compile of gmlake_allocator.cc (or a changed copy of it)
	"$CXX" -std=c++17 -fsyntax-only -Wall -Werror -DNDEBUG -D_GLIBCXX_USE_CXX11_ABI=1 \
		-I"$HERE/torch-2.11/include" -I"$HERE/cudastub" -I"$REPO/capi" -I"$REPO/python/gmlake_torch/csrc" "$1"
}
check "$SRC"
# The check catches what it is for: each known-bad change of the source must fail it (session 25's braced
# MempoolId_t inside C10_UNLIKELY reached a GPU machine; an override whose signature drifted from torch's).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
n=0
while IFS='|' read -r from to; do
	[ -z "$from" ] && continue
	n=$((n + 1))
	grep -qF -- "$from" "$SRC" || { echo "cxx-check: self-test $n: '$from' is no longer in the source: update check.sh" >&2; exit 1; }
	python3 - "$SRC" "$TMP/m$n.cc" "$from" "$to" <<'PY'
import sys
src, dst, a, b = sys.argv[1:]
open(dst, "w").write(open(src).read().replace(a, b, 1))
PY
	if check "$TMP/m$n.cc" >/dev/null 2>&1; then
		echo "cxx-check: self-test $n: the source with '$from' -> '$to' still compiles: the check is blind to it" >&2
		exit 1
	fi
done <<'MUT'
C10_UNLIKELY((pool != MempoolId_t{0, 0}))|C10_UNLIKELY(pool != MempoolId_t{0, 0})
void setNoSplit(DeviceIndex device, MempoolId_t mempool_id) override|void setNoSplit(DeviceIndex device, MempoolId_t mempool_id, bool on) override
double getMemoryFraction(DeviceIndex device) override|float getMemoryFraction(DeviceIndex device) override
MUT
echo "cxx-check: gmlake_allocator.cc compiles against torch 2.11's headers ($($CXX --version | head -1)); $n known-bad changes fail it"
