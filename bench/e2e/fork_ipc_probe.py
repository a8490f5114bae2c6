#!/usr/bin/env python3
"""Processes beside the allocator, under whichever allocator the environment picks (GMLAKE=1 for gmlake):
  fork: a process that allocated forks (os.fork, as DataLoader workers and fork-started multiprocessing do); the
        child does CPU work, drops the parent's CUDA tensors and exits normally: it must exit 0 within 60 s
        (libgmlake refuses a forked child every call, in C, so nothing enters the Go runtime there), and the
        parent allocates on afterwards.
  ipc:  torch.multiprocessing (spawn) shares a CUDA tensor with a consumer that reads it, writes it, and drops
        it; the producer sees the write (issue 37 item 2). One JSON line per check.
    GMLAKE=1 python3 bench/e2e/fork_ipc_probe.py
"""
import json
import os
import signal
import sys
import time

import torch
import torch.multiprocessing as mp


def consumer(q, done):
    t = q.get()
    ok = bool((t == 7).all())
    t.add_(1)
    torch.cuda.synchronize()
    del t
    done.put(ok)


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
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=consumer, args=(q, done))
    p.start()
    res = {"allocator": alloc, "check": "ipc"}
    try:
        t = torch.full((1 << 20,), 7, device="cuda", dtype=torch.float32)
        q.put(t)
        ok = done.get(timeout=60)
        torch.cuda.synchronize()
        res.update(ok=bool(ok and (t == 8).all()), consumer_read=ok, producer_sees_write=bool((t == 8).all()))
    except Exception as e:
        res.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
    p.join(30)
    if p.is_alive():
        p.kill()
    res["consumer_exit"] = p.exitcode
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
