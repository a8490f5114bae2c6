#!/usr/bin/env python3
"""Where the nanoseconds of one allocation+free pair go, layer by layer, in one process per allocator.

  python3 breakdown.py --out results.jsonl                       # native (or PYTORCH_CUDA_ALLOC_CONF=...)
  GMLAKE=1 python3 breakdown.py --out results.jsonl              # gmlake installed as PyTorch's allocator
  bench/torch/breakdown.sh                                       # all three allocators, then the table

Layers timed (ns per pair, warm cache, default stream, best of --repeat):
  py        torch.empty(n, dtype=uint8, device="cuda") then drop, from Python: what the user feels
  cpp       at::empty(n) then drop, from C++: the same without the interpreter
  dataptr   CUDAAllocator::allocate(n) then drop the DataPtr: the allocator as at::empty calls it
  raw       CUDAAllocator::raw_alloc / raw_delete
  abi       gmlake_alloc / gmlake_free through function pointers: libgmlake's C ABI (gmlake only)
  cross     gmlake_init(1) twice: two no-op crossings from C into Go and back, what each pair pays to enter
            Go twice (gmlake only)
The Go layers below the ABI (impl/clib, impl/serve, the engine) are Go benchmarks run beside this one
(BenchmarkCLibAllocFree, BenchmarkServeAllocFree, BenchmarkAllocFree): breakdown.sh runs them.
Sizes: 512 B, 1 MiB, 8 MiB, 256 MiB. Prints "BREAKDOWN {json}" and appends the JSON line to --out.
"""
import argparse
import ctypes
import json
import os
import sys
import time

from hotloop import SIZES, name, py_pair  # noqa: E402,F401  (bench/torch/hotloop.py)

SRC = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <chrono>
#include <stdexcept>
using clk = std::chrono::steady_clock;
typedef void* (*gm_alloc_t)(size_t, int, void*);
typedef void (*gm_free_t)(void*, size_t, int, void*);
typedef void (*gm_init_t)(int);

template <class F> double per(F f, int64_t n) {
  for (int i = 0; i < 1000; i++) f();
  auto t0 = clk::now();
  for (int64_t i = 0; i < n; i++) f();
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count() / n;
}
double cpp_empty(int64_t size, int64_t n) {
  auto opt = at::TensorOptions().dtype(at::kByte).device(at::kCUDA);
  return per([&] { auto t = at::empty({size}, opt); }, n);
}
double dataptr(int64_t size, int64_t n) {
  auto* A = c10::cuda::CUDACachingAllocator::get();
  return per([&] { auto d = A->allocate(size); }, n);
}
double raw(int64_t size, int64_t n) {
  auto* A = c10::cuda::CUDACachingAllocator::get();
  return per([&] { A->raw_delete(A->raw_alloc(size)); }, n);
}
double abi_pair(int64_t a, int64_t f, int64_t size, int64_t n) {
  auto af = reinterpret_cast<gm_alloc_t>(a);
  auto ff = reinterpret_cast<gm_free_t>(f);
  int dev = c10::cuda::getCurrentCUDAStream().device_index();
  void* s = c10::cuda::getCurrentCUDAStream().stream();
  return per([&] {
    void* p = af(size, dev, s);
    if (!p) throw std::runtime_error("gmlake_alloc returned NULL");
    ff(p, size, dev, s);
  }, n);
}
double cross(int64_t i, int64_t n) {
  auto fi = reinterpret_cast<gm_init_t>(i);
  return per([&] { fi(1); fi(1); }, n);
}
'''
FUNCS = ["cpp_empty", "dataptr", "raw", "abi_pair", "cross"]  # not "abi": the C++ ABI namespace (cxxabi.h) has that name




def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out")
    p.add_argument("--pairs", type=int, default=100000, help="pairs per C++ timing")
    p.add_argument("--pypairs", type=int, default=20000, help="pairs per Python timing")
    p.add_argument("--repeat", type=int, default=5, help="best of this many timings per figure")
    a = p.parse_args()
    import torch
    from torch.utils.cpp_extension import load_inline
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or ""
    alloc = "gmlake" if os.environ.get("GMLAKE") == "1" else ("expandable" if "expandable_segments:True" in conf else "native")
    res = dict(kind="breakdown", alloc=alloc, torch=torch.__version__, ok=False)
    try:
        t0 = time.time()
        m = load_inline("gmlake_breakdown", cpp_sources=SRC, functions=FUNCS, with_cuda=True, extra_cflags=["-O2"])
        print("breakdown: built in %.0f s" % (time.time() - t0), file=sys.stderr, flush=True)
        torch.empty(1, device="cuda")
        res["backend"] = torch.cuda.get_allocator_backend()
        res["gpu"] = torch.cuda.get_device_name()
        lib = None
        if alloc == "gmlake":
            import gmlake_torch
            res["installed"] = gmlake_torch.mode()
            lib = gmlake_torch.load()
            af = ctypes.cast(lib.gmlake_alloc, ctypes.c_void_p).value
            ff = ctypes.cast(lib.gmlake_free, ctypes.c_void_p).value
            fi = ctypes.cast(lib.gmlake_init, ctypes.c_void_p).value
        best = lambda f: round(min(f() for _ in range(a.repeat)), 1)  # noqa: E731
        for s in SIZES:
            k = str(s)
            res["py." + k] = best(lambda: py_pair(torch, s, a.pypairs))
            res["cpp." + k] = best(lambda: m.cpp_empty(s, a.pairs))
            res["dataptr." + k] = best(lambda: m.dataptr(s, a.pairs))
            res["raw." + k] = best(lambda: m.raw(s, a.pairs))
            if lib is not None:
                res["abi." + k] = best(lambda: m.abi_pair(af, ff, s, a.pairs))
            print("breakdown %s %s: %s" % (alloc, k, {x: res.get(x + "." + k) for x in ("py", "cpp", "dataptr", "raw", "abi")}),
                  file=sys.stderr, flush=True)
        if lib is not None:
            res["cross"] = best(lambda: m.cross(fi, a.pairs))
        res["ok"] = True
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
    line = json.dumps(res, sort_keys=True)
    print("BREAKDOWN " + line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
