#!/usr/bin/env python3
"""The breakdown table from breakdown.sh's results: breakdown_table.py RESULTS.jsonl GO-BENCH.txt

Per size: each layer's ns per pair for native, expandable_segments and gmlake (the best of the runs), then
gmlake's pair split into what each layer adds (differences of adjacent layers), and gmlake's ratio to native."""
import json
import re
import sys

from hotloop import SIZES, name, py_pair  # noqa: E402,F401  (bench/torch/hotloop.py)





def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    best = {}
    for r in rows:
        if not r.get("ok"):
            print("a run failed: %s %s" % (r.get("alloc"), r.get("error")))
            continue
        for k, v in r.items():
            if isinstance(v, (int, float)) and "." in k or k == "cross":
                key = (r["alloc"], k)
                best[key] = min(best.get(key, v), v)
    go = {}
    for l in open(sys.argv[2]):
        m = re.match(r"Benchmark(\w+)/gmlake/(\d+)(B|MiB)-\d+\s+\d+\s+([\d.]+) ns/op", l)
        if m:
            layer = {"AllocFree": "engine", "ServeAllocFree": "serve", "CLibAllocFree": "clib"}[m.group(1)]
            size = int(m.group(2)) << (20 if m.group(3) == "MiB" else 0)
            v = float(m.group(4))
            go[(layer, size)] = min(go.get((layer, size), v), v)
    g = lambda a, k: best.get((a, k))  # noqa: E731
    gpu = rows[0].get("gpu", "the GPU machine") if rows else "?"
    print("## ns per allocation+free pair (best of runs), %s host, torch %s\n" % (gpu, rows[0].get("torch") if rows else "?"))
    print("| size | layer | native | expandable | gmlake | gmlake / native |")
    print("|---|---|---|---|---|---|")
    for s in SIZES:
        for layer in ("py", "cpp", "dataptr", "raw", "abi"):
            n, e, m = g("native", "%s.%d" % (layer, s)), g("expandable", "%s.%d" % (layer, s)), g("gmlake", "%s.%d" % (layer, s))
            f = lambda v: "-" if v is None else "%.0f" % v  # noqa: E731
            ratio = "%.2fx" % (m / n) if m and n else "-"
            print("| %s | %s | %s | %s | %s | %s |" % (name(s), layer, f(n), f(e), f(m), ratio))
    print("\n## gmlake's pair, layer by layer (ns; each row is what the layer adds over the one below)\n")
    print("| size | torch above the allocator (py - dataptr) | of which Python (py - cpp) | C++ allocator (dataptr - abi) | two crossings into Go | capi's Go (abi - crossings - clib) | impl/clib (clib - serve) | impl/serve (serve - engine) | engine | native's allocator (dataptr) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    cross = g("gmlake", "cross")
    for s in SIZES:
        py, cpp, dp, ab = (g("gmlake", "%s.%d" % (l, s)) for l in ("py", "cpp", "dataptr", "abi"))
        cl, sv, en = go.get(("clib", s)), go.get(("serve", s)), go.get(("engine", s))
        if None in (py, cpp, dp, ab, cross, cl, sv, en):
            print("| %s | missing figures |" % name(s))
            continue
        print("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s |" % (
            name(s), py - dp, py - cpp, dp - ab, cross, ab - cross - cl, cl - sv, sv - en, en,
            "%.0f" % g("native", "dataptr.%d" % s) if g("native", "dataptr.%d" % s) else "-"))


if __name__ == "__main__":
    main()
