#!/usr/bin/env bash
# PyTorch's own allocator tests (bench/torch/pytorch_suite: test_cuda.py's allocator tests and TestMemPool,
# copied with their licence and commit) under native, expandable_segments and gmlake (the installed wheel,
# GMLAKE=1), one pytest per allocator, then one table (pytorch_suite_table.py): docs/results/pytorch-suite.md.
#   OUT=$OUT bash bench/torch/pytorch_suite.sh [pytest -k expression]    # carry dist (make wheel)
# SUITE_ALLOCATORS="gmlake" runs a subset; SUITE_TIMEOUT caps each allocator's run (seconds, default 170).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/pytorch_suite}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
WHL=$(ls "$REPO"/dist/gmlake_torch-*.whl 2>/dev/null | head -1)
if [ -z "$WHL" ]; then
	echo "pytorch_suite.sh: no wheel in dist/: run make wheel here and carry dist" >&2
	exit 2
fi
"$PY" -m pip install -q --no-index --no-deps --force-reinstall "$WHL" 2>&1 | tail -2
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# expecttest.py stands in for the package torch.testing._internal needs and the GPU machine lacks
export PYTHONPATH=$HERE/pytorch_suite${PYTHONPATH:+:$PYTHONPATH}
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE
K=${1:-}
# pytest-timeout, where installed, ends a hung test (60 s) instead of the allocator's whole run
TO=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TO=(--timeout 60)
T0=$(date +%s)
cols=()
for a in ${SUITE_ALLOCATORS:-native expandable gmlake}; do
	echo "== [$(($(date +%s) - T0))s] $a"
	case $a in
	native) envs=() ;;
	expandable) envs=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
	gmlake) envs=(GMLAKE=1) ;;
	esac
	(cd "$HERE/pytorch_suite" && env "${envs[@]}" timeout -k 10 "${SUITE_TIMEOUT:-170}" "$PY" -m pytest -q -p no:cacheprovider \
		"${TO[@]}" -o junit_family=xunit1 --junitxml="$OUT/$a.xml" ${K:+-k "$K"} test_cuda_allocator.py) >"$OUT/$a.log" 2>&1
	echo "   rc=$? $(tail -1 "$OUT/$a.log")"
	cols+=("$a=$OUT/$a.xml")
done
"$PY" "$HERE/pytorch_suite_table.py" "${cols[@]}" >"$OUT/table.md"
sed -n '/^| allocator/,$p' "$OUT/table.md"
echo "== [$(($(date +%s) - T0))s] done: $OUT/table.md"
