#!/usr/bin/env python3
"""The per-tensor cost benchmarks of issue 38 item 3, for one allocator per process (hotpath_bench.sh runs the
three: native, expandable_segments, gmlake, in alternating order).

  py-SIZE     torch.empty(SIZE, dtype=uint8, device="cuda") then drop, from Python (ns per pair)
  raw-SIZE    raw_alloc(SIZE) then raw_delete, from C++ (ns per pair)
  mixed       raw_alloc/raw_delete over the sizes of a real trace (testdata/traces/llama1b-ckpt.trace.gz, its
              allocations 1000-5095, as requested), 64 live, the oldest freed first (ns per pair)
  tN-SIZE     N C++ threads, each on its own CUDA stream, raw_alloc_with_stream(SIZE)/raw_delete in a loop:
              pairs per microsecond over all threads (throughput; N = 1, 2, 4, 8)
Sizes 512 B, 1 MiB, 8 MiB, 256 MiB; best of --repeat. One JSON line on stdout (and appended to --out)."""
import argparse
import gzip
import json
import os
import sys
import time

from hotloop import SIZES, name, py_pair  # noqa: E402,F401  (bench/torch/hotloop.py)

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "..", "..", "testdata", "traces", "llama1b-ckpt.trace.gz")

SRC = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
double raw_pair(int64_t size, int64_t n) {
  auto* A = c10::cuda::CUDACachingAllocator::get();
  for (int i = 0; i < 1000; i++) A->raw_delete(A->raw_alloc(size));
  auto t0 = clk::now();
  for (int64_t i = 0; i < n; i++) A->raw_delete(A->raw_alloc(size));
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count() / n;
}
double mixed(std::vector<int64_t> sizes, int64_t rounds) {
  auto* A = c10::cuda::CUDACachingAllocator::get();
  const size_t live = 64;
  std::vector<void*> ring(live, nullptr);
  size_t k = 0;
  auto pass = [&] {
    for (auto s : sizes) {
      if (ring[k % live]) A->raw_delete(ring[k % live]);
      ring[k % live] = A->raw_alloc(s);
      k++;
    }
  };
  pass();
  auto t0 = clk::now();
  for (int64_t r = 0; r < rounds; r++) pass();
  double ns = std::chrono::duration<double, std::nano>(clk::now() - t0).count() / (rounds * sizes.size());
  for (auto& p : ring) { if (p) A->raw_delete(p); p = nullptr; }
  return ns;
}
double threads(int64_t nthreads, int64_t size, int64_t n) {
  auto* A = c10::cuda::CUDACachingAllocator::get();
  int dev = c10::cuda::current_device();
  std::vector<c10::cuda::CUDAStream> streams;
  for (int64_t t = 0; t < nthreads; t++) streams.push_back(c10::cuda::getStreamFromPool(false, dev));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int64_t t = 0; t < nthreads; t++) {
    ts.emplace_back([&, t] {
      c10::cuda::CUDAGuard g(dev);
      cudaStream_t s = streams[t].stream();
      for (int i = 0; i < 1000; i++) A->raw_delete(A->raw_alloc_with_stream(size, s));
      ready++;
      while (!go.load()) {}
      for (int64_t i = 0; i < n; i++) A->raw_delete(A->raw_alloc_with_stream(size, s));
    });
  }
  while (ready.load() < nthreads) {}
  auto t0 = clk::now();
  go = true;
  for (auto& th : ts) th.join();
  double us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
  return (double)(nthreads * n) / us;
}
'''


def trace_sizes(first=1000, count=4096):
    out = []
    with gzip.open(TRACE, "rt") as f:
        for line in f:
            p = line.split()
            if p and p[0] == "a":
                if int(p[1]) >= first:
                    out.append(int(p[2]))
                if len(out) == count:
                    break
    return out




def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out")
    p.add_argument("--pairs", type=int, default=100000)
    p.add_argument("--pypairs", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", default="1,2,4,8", help="thread counts of the tN rows, comma-separated; empty: none")
    a = p.parse_args()
    import torch
    from torch.utils.cpp_extension import load_inline
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or ""
    alloc = "gmlake" if os.environ.get("GMLAKE") == "1" else ("expandable" if "expandable_segments:True" in conf else "native")
    m = load_inline("gmlake_hotpath_bench", cpp_sources=SRC, functions=["raw_pair", "mixed", "threads"], with_cuda=True,
                    extra_cflags=["-O2"])
    torch.empty(1, device="cuda")
    res = {"alloc": alloc, "backend": torch.cuda.get_allocator_backend(), "gpu": torch.cuda.get_device_name(),
           "torch": torch.__version__}
    best = lambda f, agg=min: round(agg(f() for _ in range(a.repeat)), 1)  # noqa: E731
    for s in SIZES:
        res["py-%d" % s] = best(lambda: py_pair(torch, s, a.pypairs))
        res["raw-%d" % s] = best(lambda: m.raw_pair(s, a.pairs))
        print("hotpath %s %d: py %s raw %s" % (alloc, s, res["py-%d" % s], res["raw-%d" % s]), file=sys.stderr, flush=True)
    sizes = trace_sizes()
    res["mixed"] = best(lambda: m.mixed(sizes, 20))
    for n in [int(x) for x in a.threads.split(",") if x]:
        for s in SIZES:
            res["t%d-%d" % (n, s)] = best(lambda: m.threads(n, s, a.pairs // 4), max)
        print("hotpath %s threads %d: %s" % (alloc, n, [res["t%d-%d" % (n, s)] for s in SIZES]), file=sys.stderr, flush=True)
    line = json.dumps(res)
    print(line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
