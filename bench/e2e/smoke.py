#!/usr/bin/env python3
"""Smoke test of gmlake inside PyTorch on a real GPU, before the benchmark spends time on it (about 20 s).

  python3 smoke.py --out results.jsonl

Checks, each reported by name: enable() swaps the allocator before CUDA starts; tensors allocated through
gmlake hold the right data (a matmul against the same matmul on the CPU); a block used on a side stream
(record_stream) keeps its data; torch.cuda.empty_cache() and set_per_process_memory_fraction() reach the
library; an impossible allocation raises torch.OutOfMemoryError (or RuntimeError in the "pluggable" fallback) and training
can go on afterwards; record() writes a trace; stats() reports peaks. Prints "SMOKE {json}" and appends it.
"""
import argparse
import gzip
import os
import sys
import tempfile
import time
import traceback

from results import emit  # noqa: E402  (bench/e2e/results.py, beside this script)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    a = p.parse_args()
    res, checks = dict(kind="smoke", ok=False), {}
    t0 = time.time()

    def check(name, cond, detail=""):
        checks[name] = bool(cond)
        print("smoke: %-28s %s %s" % (name, "ok" if cond else "FAILED", detail), file=sys.stderr, flush=True)

    try:
        import gmlake_torch
        import torch
        res["torch"] = torch.__version__
        res["mode"] = gmlake_torch.enable(verbose=True)
        check("enable", gmlake_torch.enabled(), res["mode"])
        dev = torch.device("cuda", 0)
        x = torch.randn(1024, 1024, device=dev)
        y = torch.randn(1024, 1024, device=dev)
        z = (x @ y).cpu()
        check("matmul data", torch.allclose(z, x.cpu() @ y.cpu(), rtol=1e-3, atol=1e-2))
        s = gmlake_torch.stats(0)
        check("stats live", s.get("initialized") and s["num_live"] >= 3, "live=%s" % s.get("num_live"))

        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            w = torch.full((4 << 20,), 7.0, device=dev)
        w.record_stream(torch.cuda.current_stream())
        side.synchronize()
        check("record_stream", float(w.sum().item()) == 7.0 * (4 << 20))
        del w, x, y

        before = gmlake_torch.stats(0)["reserved_bytes"]
        torch.cuda.empty_cache()
        after = gmlake_torch.stats(0)["reserved_bytes"]
        check("empty_cache hook", after <= before, "%d -> %d bytes reserved" % (before, after))

        free, total = torch.cuda.mem_get_info()
        oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None), RuntimeError) if t)
        try:
            torch.empty(int(total * 2), dtype=torch.uint8, device=dev)
            check("oom raises", False, "a %d-byte tensor was allocated" % (total * 2))
        except oom_types as e:
            is_torch_oom = type(e).__name__ == "OutOfMemoryError"
            check("oom raises", "out of memory" in str(e).lower(), type(e).__name__)
            res["oom_type"] = type(e).__name__
            res["oom_is_torch_oom"] = is_torch_oom
        torch.cuda.set_per_process_memory_fraction(0.05, 0)
        try:
            torch.empty(int(total * 0.2), dtype=torch.uint8, device=dev)
            check("memory fraction hook", False, "20% allocated under a 5% cap")
        except oom_types as e:
            check("memory fraction hook", "out of memory" in str(e).lower(), type(e).__name__)
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        big = torch.ones(int(total * 0.2) // 4, device=dev)
        check("alloc after oom", float(big[-1].item()) == 1.0)
        del big

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "smoke.trace.gz")
            with gmlake_torch.record(path):
                lin = torch.nn.Linear(512, 512, device=dev)
                loss = lin(torch.randn(64, 512, device=dev)).square().mean()
                loss.backward()
                del lin, loss
            with gzip.open(path, "rt") as f:
                lines = f.read().splitlines()
            # The v2 format (trace/frame.go): a "# gmlake-trace v2" header, then events, framed by "#" lines.
            events = [l for l in lines if not l.startswith("#")]
            ok = bool(lines) and lines[0].startswith("# gmlake-trace v2") and all(l.split()[0] in ("a", "f") for l in events)
            check("record trace", ok and any(l.startswith("f ") for l in events), "%d lines" % len(lines))
        s = gmlake_torch.stats(0)
        check("stats peaks", s["peak_reserved_bytes"] >= s["peak_allocated_bytes"] > 0)
        res["stats"] = s
        res["ok"] = all(checks.values())
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
    res["checks"] = checks
    res["wall_s"] = round(time.time() - t0, 1)
    emit("SMOKE", res, a.out)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
