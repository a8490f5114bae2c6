#!/usr/bin/env bash
# CI check of the gmlake_torch wheel (no GPU, no torch, no network): the wheel installs into a fresh virtual
# environment offline, and its tests (python/tests) pass against the installed package on the simulated
# device, and the source folder installs as well. Usage: python/tests/wheel_test.sh dist/gmlake_torch-*.whl   (make wheel-test builds and runs it)
set -euo pipefail
WHEEL=${1:?usage: wheel_test.sh WHEEL}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if ! "$PY" -m venv "$TMP/venv" >"$TMP/venv.log" 2>&1; then
	echo "wheel-test: SKIPPED: '$PY -m venv' cannot create a virtual environment here (install python3-venv):"
	sed 's/^/  /' "$TMP/venv.log"
	exit 0
fi
"$TMP/venv/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check -q "$WHEEL"
# The source folder installs too (offline, build isolation on: python/build_wheel.py is its build backend).
"$PY" -m venv "$TMP/src" >/dev/null
"$TMP/src/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check -q "$HERE/.."
(cd "$TMP" && GMLAKE=1 "$TMP/src/bin/python" -c 'import sys, gmlake_torch; assert "site-packages" in gmlake_torch.__file__; assert any(type(f).__name__ == "_Finder" for f in sys.meta_path), "GMLAKE=1 hook missing"; print("wheel-test: source-folder install ok:", gmlake_torch.find_library())')
cp -r "$HERE" "$TMP/tests"  # run outside the source tree: the import must find the installed package
cd "$TMP"
GMTEST_INSTALLED=1 GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=256MiB \
	"$TMP/venv/bin/python" -c 'import gmlake_torch, os; assert "site-packages" in gmlake_torch.__file__, gmlake_torch.__file__; print("wheel-test: installed at", os.path.dirname(gmlake_torch.__file__), "library", gmlake_torch.find_library())'
GMTEST_INSTALLED=1 GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=256MiB \
	"$TMP/venv/bin/python" -m unittest discover -s "$TMP/tests" -v 2>&1 | tail -n 25
