#!/usr/bin/env python3
"""NCCL on the allocator's memory with a world of one (issue 37 item 4), under whichever allocator the
environment picks (GMLAKE=1 for gmlake; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; neither: native).
Each check prints one JSON line {"check", "ok", ...} and the script exits 1 if any failed:
  - collectives (all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor) on tensors of 4 KiB to
    96 MiB, and on one made after fragmenting the cache (under gmlake a stitched block), give the right values;
  - ProcessGroupNCCL's registration of a private MemPool's segments (register_mem_pool, ncclCommRegister on
    each segment of the pool's snapshot), a collective on a tensor in it, then deregister_mem_pool;
  - with TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 (set by the caller) the allocator's segment events
    register every segment as it is made: the collectives above run on registered memory;
  - torch's symmetric memory (torch.distributed._symmetric_memory: its own allocation, rendezvous over the
    group, one_shot_all_reduce) under each backend symm_mem offers (its default, then "CUDA" and "NCCL"):
    the NCCL backend allocates through a MemPool with its own allocator (ncclMemAlloc), the CUDA backend maps
    its own memory with the driver;
  - no leak: the baseline is taken after the process group and a warm-up of every collective (NCCL's own
    buffers and the first tensors torch keeps); after the checks allocated bytes are back to it, and after
    empty_cache the device's free memory is back within 64 MiB of it.
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG GMLAKE=1 python3 bench/e2e/nccl_one_gpu.py
"""
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

failed = 0


def report(check, ok, **kw):
    global failed
    failed += 0 if ok else 1
    print(json.dumps({"check": check, "ok": bool(ok), **kw}), flush=True)


def attempt(check, fn):
    try:
        fn()
    except Exception as e:  # a failure of one check is reported and the others still run
        report(check, False, error=f"{type(e).__name__}: {e}"[:400], where=traceback.format_exc().splitlines()[-3:])


def collectives(tag, n):
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    want = x.clone()
    dist.all_reduce(x)
    dist.broadcast(x, src=0)
    out = torch.empty(n, device="cuda", dtype=torch.float32)
    dist.all_gather_into_tensor(out, x)
    rs = torch.empty(n, device="cuda", dtype=torch.float32)
    dist.reduce_scatter_tensor(rs, out)
    torch.cuda.synchronize()
    ok = torch.equal(x, want) and torch.equal(out, want) and torch.equal(rs, want)
    report(f"collectives/{tag}", ok, elements=n, bytes=4 * n)


def fragmented():
    # many 16 MiB blocks, every other one freed: a 96 MiB tensor fits in no free block but in their sum
    keep, hole = [], []
    for i in range(24):
        (keep if i % 2 else hole).append(torch.empty(4 << 20, device="cuda", dtype=torch.float32))
    del hole
    collectives("after-fragmentation-96MiB", 24 << 20)
    del keep


def mem_pool():
    pg = dist.group.WORLD
    backend = pg._get_backend(torch.device("cuda"))
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    backend.register_mem_pool(pool)
    want = t.clone()
    dist.all_reduce(t)
    torch.cuda.synchronize()
    backend.deregister_mem_pool(pool)
    segs = len(pool.snapshot())
    report("register_mem_pool", torch.equal(t, want), pool_segments=segs)
    del t, want
    del pool


def symmetric(backend):
    import torch.distributed._symmetric_memory as symm_mem

    if backend != "default":
        symm_mem.set_backend(backend)
    n = 1 << 16
    t = symm_mem.empty(n, device="cuda", dtype=torch.float32)
    t.copy_(torch.arange(n, device="cuda", dtype=torch.float32))
    h = symm_mem.rendezvous(t, group=dist.group.WORLD)
    want = t.clone()
    out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", dist.group.WORLD.group_name)
    torch.cuda.synchronize()
    report(f"symmetric_memory/{backend}", torch.equal(out, want), world=h.world_size,
           backend=symm_mem.get_backend(torch.device("cuda")) if hasattr(symm_mem, "get_backend") else backend)
    del t, out, want, h


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.cuda.set_device(0)
    alloc = "gmlake" if os.environ.get("GMLAKE") == "1" else ("expandable" if "expandable" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") else "native")
    hook = os.environ.get("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", "0")
    print(json.dumps({"allocator": alloc, "register_hook": hook, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}), flush=True)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    collectives("warm-up", 1 << 10)  # NCCL's buffers and kernels, and what torch keeps after a first collective
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    free0, _ = torch.cuda.mem_get_info()
    for n in (1 << 10, 1 << 18, 1 << 22, 24 << 20):
        attempt(f"collectives/{4 * n}B", lambda n=n: collectives(f"{4 * n}B", n))
    attempt("collectives/after-fragmentation-96MiB", fragmented)
    attempt("register_mem_pool", mem_pool)
    torch.cuda.synchronize()
    report("no-leak/allocated", torch.cuda.memory_allocated() == base, allocated=torch.cuda.memory_allocated(), at_start=base)
    torch.cuda.empty_cache()
    free1, _ = torch.cuda.mem_get_info()
    report("no-leak/device", free0 - free1 <= 64 << 20, free_before=free0, free_after=free1, held_mib=(free0 - free1) / 2**20)
    # symmetric memory last: its backends keep what they mapped for the group's lifetime
    for b in ("default", "CUDA", "NCCL"):
        attempt(f"symmetric_memory/{b}", lambda b=b: symmetric(b))
    dist.destroy_process_group()
    if alloc == "gmlake":
        import gmlake_torch

        st = gmlake_torch.stats() if hasattr(gmlake_torch, "stats") else {}
        report("gmlake-stats", True, stats={k: st[k] for k in list(st)[:12]} if isinstance(st, dict) else str(st)[:300])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
