#!/usr/bin/env python3
"""Groups `perf report --no-children --sort symbol` lines (stdin) by the layer each symbol belongs to: the cgo
crossing, the engine, the serving layer, the C library, capi's Go, Go maps, the C side, the kernel. Used by
bench/abi/run.sh --perf for the per-pair breakdown (docs/results/hotpath-breakdown.md)."""
import collections
import re
import sys


def layer(kind, s):
    if kind == "k":
        return "kernel"
    if "gmlake/impl/serve." in s:
        return "impl/serve"
    if "gmlake/impl/clib." in s:
        return "impl/clib"
    if "gmlake/impl." in s:
        return "engine (impl)"
    if "gmlake/trace." in s:
        return "trace recorder"
    if s.startswith("main."):
        return "capi's Go (main.*)"
    if s.startswith(("runtime.map", "runtime.memhash", "runtime.aeshash")):
        return "Go maps"
    if s.startswith(("runtime.lock2", "runtime.unlock2", "runtime.chanrecv")):
        return "cgo: the init-done channel every callback from a C thread receives from (lock2/unlock2/chanrecv)"
    if s.startswith(("runtime.", "_cgo", "crosscall2")) or "cgocall" in s:
        return "cgo: the crossing (reentersyscall/exitsyscall, callback frames)"
    if s.startswith(("sync.", "internal/sync")):
        return "sync"
    return "C side (abi.c, the caller)"


g = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
    if m:
        g[layer(m.group(2), m.group(3))] += float(m.group(1))
for name, pct in g.most_common():
    print("%6.1f%%  %s" % (pct, name))
