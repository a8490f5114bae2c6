#!/usr/bin/env python3
"""Where the Python-level part of gmlake's torch.empty gap comes from (issue 38 item 1).

breakdown.sh shows gmlake's torch.empty+drop pair from Python ~100 ns further behind native than its at::empty
pair from C++: time spent in Python, above the allocator. This times the same Python loop (torch.empty(n,
dtype=uint8, device="cuda") then drop, best of --repeat x --pairs) under one configuration per process:
  native      PyTorch's allocator
  native+go   PyTorch's allocator with libgmlake.so loaded (the Go runtime and its threads present, not installed)
  gmlake      gmlake installed (GMLAKE=1)
Run it through pygap.sh (each configuration in its own process, in alternating order); one JSON line each."""
import argparse
import json
import os
import sys
import time

from hotloop import SIZES, name, py_pair  # noqa: E402,F401  (bench/torch/hotloop.py)




def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("conf", choices=["native", "native+go", "gmlake"])
    p.add_argument("--pairs", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    if (a.conf == "gmlake") != (os.environ.get("GMLAKE") == "1"):
        sys.exit("pygap.py: run gmlake with GMLAKE=1 and the others without it")
    import torch
    if a.conf == "native+go":
        import gmlake_torch
        gmlake_torch.load()
    torch.empty(1, device="cuda")
    res = {"conf": a.conf, "backend": torch.cuda.get_allocator_backend(), "gpu": torch.cuda.get_device_name()}
    for s in (512, 1 << 20, 8 << 20, 256 << 20):
        res[str(s)] = round(min(py_pair(torch, s, a.pairs) for _ in range(a.repeat)), 1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
