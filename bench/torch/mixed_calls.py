#!/usr/bin/env python3
"""The driver calls behind hotpath_bench.py's "mixed" pattern under gmlake (GMLAKE=1): the same ring of 64 live
tensors over the recorded trace's sizes, then gmlake_torch.stats()'s driver_calls and host cache counters per
operation. Says whether the mixed pattern's cost is the engine's host work or calls into the driver.
  GMLAKE=1 python3 bench/torch/mixed_calls.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hotpath_bench import trace_sizes  # noqa: E402


def main():
    import torch
    import gmlake_torch as gt
    sizes = trace_sizes()
    ring = [None] * 64
    k = 0

    def rounds(n):
        nonlocal k
        for _ in range(n):
            for s in sizes:
                ring[k % 64] = None
                ring[k % 64] = torch.empty(s, dtype=torch.uint8, device="cuda")
                k += 1
    rounds(1)
    torch.cuda.synchronize()
    before = gt.stats()
    n = 5
    rounds(n)
    torch.cuda.synchronize()
    after = gt.stats()
    ops = n * len(sizes)
    calls = {c: (after["driver_calls"].get(c, 0) - before["driver_calls"].get(c, 0)) / ops for c in after["driver_calls"]}
    out = {"ops": ops, "driver_calls_per_op": {c: round(v, 4) for c, v in calls.items() if v},
           "host_cache_hits_per_op": (after["host_cache_hits"] - before["host_cache_hits"]) / ops,
           "host_cache_frees_per_op": (after["host_cache_frees"] - before["host_cache_frees"]) / ops,
           "stitch_reuses_per_op": (after["num_stitch_reuses"] - before["num_stitch_reuses"]) / ops}
    print("MIXED " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
