#!/usr/bin/env bash
# Probe of the GPU machine's build environment for the gmlake_torch C++ allocator (one-off, first GPU call):
# versions (python, torch, its C++ ABI, g++, nvcc), and the exact torch + CUDA headers as tar.xz files in $OUT,
# so that the extension can be compiled (g++ -fsyntax-only / -c) on a machine without a GPU.
# Also reproduces the old OOM shim's crash (GMLAKE_SHIM=1) with a native backtrace (cuda-gdb; no gdb there).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
{
  echo "== versions"; $PY -V; which $PY
  $PY -c 'import torch,sys,os;print("torch",torch.__version__,"cxx11abi",torch._C._GLIBCXX_USE_CXX11_ABI,"cuda",torch.version.cuda,"file",torch.__file__)'
  $PY -c 'import torch.utils.cpp_extension as c;print("include_paths",c.include_paths());print("CUDA_HOME",c.CUDA_HOME)'
  $PY -c 'import torch;print("compiled with", torch._C._show_config() if hasattr(torch._C,"_show_config") else "")' | head -30
  g++ --version | head -1; which nvcc && nvcc --version | tail -2
  $PY -c 'import setuptools, wheel; print("setuptools", setuptools.__version__, "wheel", wheel.__version__)'
  $PY -m pip --version; $PY -c 'import site;print(site.getsitepackages())'
  $PY -m venv /tmp/venvprobe && echo "venv ok"
  TL=$($PY -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
  ls $TL | head -40; ldd $TL/libc10.so | head; ldd $TL/libc10_cuda.so | head
  strings /usr/lib/x86_64-linux-gnu/libstdc++.so.6 | grep -E '^GLIBCXX_3\.4\.[0-9]+$' | sort -V | tail -2
  objdump -s --section=.comment $TL/libc10.so | head -8
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
} >"$OUT/env.txt" 2>&1
TD=$($PY -c 'import torch,os;print(os.path.dirname(torch.__file__))')
tar -C "$TD" -cf - include | xz -T16 -6 >"$OUT/torch_include.tar.xz"
CH=$($PY -c 'import torch.utils.cpp_extension as c;print(c.CUDA_HOME or "")')
[ -n "$CH" ] && tar -C "$CH" -chf - include | xz -T16 -6 >"$OUT/cuda_include.tar.xz"
ls -la "$OUT" >>"$OUT/env.txt"
# The old shim's crash: enable with GMLAKE_SHIM=1, then an impossible allocation.
cat >/tmp/shim_repro.py <<'PY'
import sys, os
sys.path.insert(0, "python")
import gmlake_torch, torch
print("mode", gmlake_torch.enable(shim=True, verbose=True), flush=True)
x = torch.ones(10, device="cuda"); print("small ok", x.sum().item(), flush=True)
free, total = torch.cuda.mem_get_info()
for n in (int(total * 0.95), int(total * 2)):
    try:
        torch.empty(n, dtype=torch.uint8, device="cuda"); print("allocated?!", n)
    except Exception as e:
        print("caught", type(e).__name__, str(e)[:300], flush=True)
print("done", flush=True)
PY
export GMLAKE_LIB=$PWD/capi/libgmlake.so GMLAKE_SHIM_CACHE=/tmp/shimcache
timeout 120 $PY -X faulthandler /tmp/shim_repro.py >"$OUT/shim.txt" 2>&1; echo "rc $?" >>"$OUT/shim.txt"
timeout 150 cuda-gdb -batch -ex 'set pagination off' -ex run -ex bt -ex 'info sharedlibrary' --args $PY /tmp/shim_repro.py >"$OUT/shim_gdb.txt" 2>&1; echo "rc $?" >>"$OUT/shim_gdb.txt"
ls /tmp/shimcache >>"$OUT/shim.txt"
cat "$OUT/env.txt" | head -60; tail -30 "$OUT/shim.txt"; grep -A30 -m1 'SIGSEGV\|signal' "$OUT/shim_gdb.txt" | head -50
