#!/usr/bin/env python3
"""Processes beside the allocator, under whichever allocator the environment picks (GMLAKE=1 for gmlake):
  fork: a process that allocated forks (os.fork, as DataLoader workers and fork-started multiprocessing do); the
        child does CPU work, drops the parent's CUDA tensors and exits normally: it must exit 0 within 60 s
        (libgmlake refuses a forked child every call, in C, so nothing enters the Go runtime there), and the
        parent allocates on afterwards.
  ipc:  torch.multiprocessing (spawn) shares CUDA tensors (512 B, 24 MiB, and 96 MiB made after fragmenting the
        cache: under gmlake a stitched block) with a consumer that reads each, writes it and drops it; the
        producer sees the writes; with the consumer still alive, the producer frees its tensors and empties
        its cache, and the device's free memory is back within 64 MiB of where it was (no import left in the
        consumer, nothing left in the producer) (issue 37 item 2). One JSON line per check.
    GMLAKE=1 python3 bench/e2e/fork_ipc_probe.py
"""
import gc
import json
import os
import signal
import sys
import time

import torch
import torch.multiprocessing as mp


def consumer(q, done, bye):
    torch.cuda.init()
    torch.ones(1, device="cuda")  # CUDA up before the producer's baseline
    done.put("ready")
    while True:
        item = q.get()
        if item is None:
            break
        name, t = item
        ok = bool((t == 7).all())
        t.add_(1)
        torch.cuda.synchronize()
        n = t.numel()
        del t, item
        done.put((name, ok, n))
    gc.collect()
    done.put("released")
    bye.get(timeout=120)  # alive while the producer measures: its imports must already be gone


def stitched_tensor():
    """Under gmlake a stitched block: 24 blocks of 16 MiB, every other one freed, then 96 MiB that fits in no
    free block (under the other allocators a 96 MiB tensor from wherever they put it)."""
    keep, hole = [], []
    for i in range(24):
        (keep if i % 2 else hole).append(torch.empty(4 << 20, device="cuda", dtype=torch.float32))
    del hole
    t = torch.full((24 << 20,), 7, device="cuda", dtype=torch.float32)
    return t, keep


def ipc(alloc):
    """Produce in this process, read and write in a spawned one, free in both, no leak on either side."""
    ctx = mp.get_context("spawn")
    q, done, bye = ctx.Queue(), ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=consumer, args=(q, done, bye))
    p.start()
    res = {"allocator": alloc, "check": "ipc"}
    try:
        assert done.get(timeout=120) == "ready"
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free0, _ = torch.cuda.mem_get_info()
        t_st, keep = stitched_tensor()
        snap = None
        if alloc == "gmlake":
            import gmlake_torch

            snap = gmlake_torch.snapshot() if hasattr(gmlake_torch, "snapshot") else None
        stitched = None
        if isinstance(snap, dict):
            stitched = any(sb.get("address") == t_st.data_ptr() for sb in snap.get("stitched_blocks", []))
        tensors = {
            "512B": torch.full((128,), 7, device="cuda", dtype=torch.float32),
            "24MiB": torch.full((6 << 20,), 7, device="cuda", dtype=torch.float32),
            "stitched-96MiB": t_st,
        }
        res["stitched_block"] = stitched
        per = {}
        for name, t in tensors.items():
            q.put((name, t))
            got = done.get(timeout=60)
            torch.cuda.synchronize()
            per[name] = {"consumer_read": got[1], "producer_sees_write": bool((t == 8).all())}
        q.put(None)
        assert done.get(timeout=60) == "released"
        del tensors, t_st, keep, t
        gc.collect()
        torch.cuda.ipc_collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free1, _ = torch.cuda.mem_get_info()
        res["tensors"] = per
        res["held_after_mib"] = round((free0 - free1) / 2**20, 1)
        res["ok"] = all(v["consumer_read"] and v["producer_sees_write"] for v in per.values()) and free0 - free1 <= 64 << 20
        res["producer_allocated_after"] = torch.cuda.memory_allocated()
    except Exception as e:
        res.update(ok=False, error=f"{type(e).__name__}: {e}"[:600])
    bye.put(1)
    p.join(60)
    if p.is_alive():
        p.kill()
    res["consumer_exit"] = p.exitcode
    res["ok"] = bool(res.get("ok")) and p.exitcode == 0
    print(json.dumps(res), flush=True)


def main():
    alloc = "gmlake" if os.environ.get("GMLAKE") == "1" else ("expandable" if "expandable" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") else "native")
    xs = [torch.empty(n, device="cuda", dtype=torch.uint8) for n in (512, 1 << 20, 8 << 20)]
    pid = os.fork()
    if pid == 0:
        s = sum(i * i for i in range(100000))
        del xs
        sys.exit(0 if s > 0 else 1)
    t0 = time.time()
    while True:
        r, status = os.waitpid(pid, os.WNOHANG)
        if r:
            break
        if time.time() - t0 > 60:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -1
            break
        time.sleep(0.05)
    y = torch.ones(1 << 20, device="cuda")
    print(json.dumps({"allocator": alloc, "check": "fork", "ok": status == 0, "status": status, "seconds": round(time.time() - t0, 2), "parent_after": float(y.sum())}), flush=True)
    del xs, y
    ipc(alloc)


if __name__ == "__main__":
    main()
