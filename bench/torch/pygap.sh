#!/usr/bin/env bash
# pygap.py under native, native with libgmlake loaded, and gmlake, each in its own process, three rounds in
# alternating order (a drift of the machine shows as a spread); needs the wheel installed. OUT gets pygap.jsonl.
#   OUT=/tmp/pygap bench/torch/pygap.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/pygap}
mkdir -p "$OUT"
unset PYTORCH_CUDA_ALLOC_CONF GMLAKE
cd /
for round in 1 2 3; do
	order="native native+go gmlake"
	[ "$round" = 2 ] && order="gmlake native+go native"
	for c in $order; do
		if [ "$c" = gmlake ]; then GMLAKE=1 "$PY" "$HERE/pygap.py" "$c"; else "$PY" "$HERE/pygap.py" "$c"; fi
	done
done | tee "$OUT/pygap.jsonl"
