#!/usr/bin/env python3
"""Hot path: gmlake through its C ABI against PyTorch's own allocator, in the same process, timed in C++.

  python3 microbench.py --out results.jsonl      # PyTorch's allocator as configured by PYTORCH_CUDA_ALLOC_CONF

Paths measured (ns per alloc+free pair, warm cache, default stream, no Python in the loop):
  native        c10::cuda::CUDACachingAllocator::get()->raw_alloc / raw_delete (the allocator in use: native,
                or expandable segments when PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
  native_dataptr the same through raw_allocate / raw_deallocate (DataPtr; the figure in docs/cuda-vmm.md)
  gmlake        gmlake_alloc / gmlake_free called through function pointers: the C ABI PyTorch calls
  pluggable     a torch CUDAPluggableAllocator around gmlake_alloc / gmlake_free (not installed), through
                raw_alloc / raw_delete: what PyTorch adds on top (std::function, a mutex, a metadata map)
Patterns (as ../../../shared/tools/torch_alloc_bench.py): pair-SIZE (one size, N times) for 512 B, 1 MiB,
8 MiB, 256 MiB; mixed (64 live blocks of sizes 512 B..256 MiB, freed in shuffled order).
gmlake runs on device 0 through impl/cudavmm, beside PyTorch's allocator, with GMLAKE_POLICY (default gmlake).
Prints "MICRO {json}" and appends the JSON line to --out.
"""
import argparse
import ctypes
import os
import sys
import time

from results import emit  # noqa: E402  (bench/e2e/results.py, beside this script)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

SRC = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#ifdef GM_PLUG
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#endif
#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <vector>
using clk = std::chrono::steady_clock;
typedef void* (*gm_alloc_t)(size_t, int, void*);
typedef void (*gm_free_t)(void*, size_t, int, void*);

struct Native {
  c10::cuda::CUDACachingAllocator::CUDAAllocator* A = c10::cuda::CUDACachingAllocator::get();
  void* alloc(size_t n) { return A->raw_alloc(n); }
  void free(void* p, size_t) { A->raw_delete(p); }
};
struct NativeDataPtr {
  c10::cuda::CUDACachingAllocator::CUDAAllocator* A = c10::cuda::CUDACachingAllocator::get();
  void* alloc(size_t n) { return A->raw_allocate(n); }
  void free(void* p, size_t) { A->raw_deallocate(p); }
};
struct Direct {
  gm_alloc_t af; gm_free_t ff; int dev; void* s;
  Direct(int64_t a, int64_t f) : af(reinterpret_cast<gm_alloc_t>(a)), ff(reinterpret_cast<gm_free_t>(f)),
      dev(c10::cuda::getCurrentCUDAStream().device_index()), s(c10::cuda::getCurrentCUDAStream().stream()) {}
  void* alloc(size_t n) { void* p = af(n, dev, s); if (!p) throw std::runtime_error("gmlake_alloc returned NULL"); return p; }
  void free(void* p, size_t n) { ff(p, n, dev, s); }
};
#ifdef GM_PLUG
struct Plug {
  std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> A;
  Plug(int64_t a, int64_t f) {
    std::function<void*(size_t, int, cudaStream_t)> af = reinterpret_cast<void* (*)(size_t, int, cudaStream_t)>(a);
    std::function<void(void*, size_t, int, cudaStream_t)> ff = reinterpret_cast<void (*)(void*, size_t, int, cudaStream_t)>(f);
    A = torch::cuda::CUDAPluggableAllocator::createCustomAllocator(af, ff);
  }
  void* alloc(size_t n) { void* p = A->raw_alloc(n); if (!p) throw std::runtime_error("pluggable raw_alloc returned NULL"); return p; }
  void free(void* p, size_t) { A->raw_delete(p); }
};
#endif

template <class X> double pair_ns(X& x, int64_t size, int64_t n) {
  for (int i = 0; i < 1000; i++) x.free(x.alloc(size), size);
  auto t0 = clk::now();
  for (int64_t i = 0; i < n; i++) x.free(x.alloc(size), size);
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count() / n;
}
template <class X> double mixed_ns(X& x, int64_t rounds) {
  std::vector<size_t> sizes = {512, 4096, 65536, 1 << 20, 3 << 20, 8 << 20, 24 << 20, 100 << 20, 256 << 20};
  std::mt19937 rng(42);
  std::vector<size_t> pick(64);
  for (auto& s : pick) s = sizes[rng() % sizes.size()];
  std::vector<void*> live(64);
  std::vector<int> order(64);
  for (int i = 0; i < 64; i++) order[i] = i;
  auto round = [&]() {
    for (int i = 0; i < 64; i++) live[i] = x.alloc(pick[i]);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) x.free(live[i], pick[i]);
  };
  for (int r = 0; r < 50; r++) round();
  auto t0 = clk::now();
  for (int64_t r = 0; r < rounds; r++) round();
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count() / (rounds * 64);
}

double native_pair(int64_t size, int64_t n) { Native x; return pair_ns(x, size, n); }
double native_mixed(int64_t rounds) { Native x; return mixed_ns(x, rounds); }
double native_dataptr_pair(int64_t size, int64_t n) { NativeDataPtr x; return pair_ns(x, size, n); }
double native_dataptr_mixed(int64_t rounds) { NativeDataPtr x; return mixed_ns(x, rounds); }
double gm_pair(int64_t a, int64_t f, int64_t size, int64_t n) { Direct x(a, f); return pair_ns(x, size, n); }
double gm_mixed(int64_t a, int64_t f, int64_t rounds) { Direct x(a, f); return mixed_ns(x, rounds); }
#ifdef GM_PLUG
double plug_pair(int64_t a, int64_t f, int64_t size, int64_t n) { Plug x(a, f); return pair_ns(x, size, n); }
double plug_mixed(int64_t a, int64_t f, int64_t rounds) { Plug x(a, f); return mixed_ns(x, rounds); }
#else
double plug_pair(int64_t, int64_t, int64_t, int64_t) { return -1; }
double plug_mixed(int64_t, int64_t, int64_t) { return -1; }
#endif
'''
FUNCS = ["native_pair", "native_mixed", "native_dataptr_pair", "native_dataptr_mixed", "gm_pair", "gm_mixed",
         "plug_pair", "plug_mixed"]


def build():
    from torch.utils.cpp_extension import load_inline
    last = None
    for name, flags in (("gmlake_microbench_plug", ["-O2", "-DGM_PLUG"]), ("gmlake_microbench", ["-O2"])):
        try:
            t0 = time.time()
            m = load_inline(name, cpp_sources=SRC, functions=FUNCS, with_cuda=True, extra_cflags=flags, verbose=False)
            print("microbench: built %s in %.0f s" % (name, time.time() - t0), file=sys.stderr, flush=True)
            return m, "-DGM_PLUG" in flags
        except Exception as e:  # noqa: BLE001
            last = e
            print("microbench: building %s failed: %s" % (name, str(e)[-1500:]), file=sys.stderr, flush=True)
    raise last


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out")
    p.add_argument("--pairs", type=int, default=200000)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3, help="best of this many timings per figure")
    a = p.parse_args()
    import torch
    import gmlake_torch
    res = dict(kind="micro", conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "native",
               policy=os.environ.get("GMLAKE_POLICY") or "gmlake", torch=torch.__version__, ok=False,
               # under `python -m gmlake_torch` the "native" paths are PyTorch's current allocator: gmlake's C++ one
               installed=gmlake_torch.mode() or "pytorch", backend=torch.cuda.get_allocator_backend(),
               alloc=os.environ.get("ECO_ALLOC"))
    try:
        m, plug = build()
        torch.cuda.init()
        torch.empty(1, device="cuda")
        lib = gmlake_torch.load()
        af = ctypes.cast(lib.gmlake_alloc, ctypes.c_void_p).value
        ff = ctypes.cast(lib.gmlake_free, ctypes.c_void_p).value
        best = lambda f: round(min(f() for _ in range(a.repeat)), 1)  # noqa: E731
        for s in (512, 1 << 20, 8 << 20, 256 << 20):
            k = "pair-%d" % s
            res["native." + k] = best(lambda: m.native_pair(s, a.pairs))
            res["native_dataptr." + k] = best(lambda: m.native_dataptr_pair(s, a.pairs))
            res["gmlake." + k] = best(lambda: m.gm_pair(af, ff, s, a.pairs))
            if plug:
                res["pluggable." + k] = best(lambda: m.plug_pair(af, ff, s, a.pairs))
            print("microbench %s: %s" % (k, {x: res.get(x + "." + k) for x in ("native", "native_dataptr", "gmlake", "pluggable")}),
                  file=sys.stderr, flush=True)
        res["native.mixed"] = best(lambda: m.native_mixed(a.rounds))
        res["native_dataptr.mixed"] = best(lambda: m.native_dataptr_mixed(a.rounds))
        res["gmlake.mixed"] = best(lambda: m.gm_mixed(af, ff, a.rounds))
        if plug:
            res["pluggable.mixed"] = best(lambda: m.plug_mixed(af, ff, a.rounds))
        for k in [k for k in res if k.startswith("gmlake.")]:
            pat = k.split(".", 1)[1]
            res["ratio_gmlake_vs_native." + pat] = round(res[k] / res["native." + pat], 3)
        res["gmlake_stats"] = gmlake_torch.stats(torch.cuda.current_device())
        res["ok"] = True
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
    emit("MICRO", res, a.out)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
