#!/usr/bin/env python3
"""hotpath_table.py RESULTS.jsonl: hotpath_bench.sh's table. ns per pair (lower is better, best of the runs) and
threaded throughput in pairs/us (higher is better, best of the runs), native / expandable / gmlake, gmlake's ratio
to native, and each thread count's throughput relative to one thread (scaling)."""
import json
import sys

from hotloop import SIZES, name, py_pair  # noqa: E402,F401  (bench/torch/hotloop.py)

ALLOCS = ("native", "expandable", "gmlake")




def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    best = {}
    for r in rows:
        for k, v in r.items():
            if not isinstance(v, (int, float)):
                continue
            hi = k.startswith("t")
            old = best.get((r["alloc"], k))
            best[(r["alloc"], k)] = v if old is None else (max(old, v) if hi else min(old, v))
    gpu = rows[0].get("gpu", "?") if rows else "?"
    print("## ns per pair, %s, torch %s (lower is better)\n" % (gpu, rows[0].get("torch") if rows else "?"))
    print("| pattern | native | expandable | gmlake | gmlake / native |\n|---|---|---|---|---|")
    keys = ["py-%d" % s for s in SIZES] + ["raw-%d" % s for s in SIZES] + ["mixed"]
    for k in keys:
        v = [best.get((a, k)) for a in ALLOCS]
        label = k if k == "mixed" else "%s %s" % ("Python torch.empty" if k.startswith("py") else "C++ raw pair", name(int(k.split("-")[1])))
        ratio = "%.2fx" % (v[2] / v[0]) if v[0] and v[2] else "-"
        print("| %s | %s | %s | %s | %s |" % (label, *("-" if x is None else x for x in v), ratio))
    if not any(k.startswith("t") for (_, k) in best):
        return  # hotpath_bench.py --threads= : no thread rows were measured
    print("\n## threads, each on its own stream: pairs per microsecond (higher is better; scaling = vs 1 thread)\n")
    print("| size | threads | native | expandable | gmlake | gmlake / native | scaling native | scaling gmlake |")
    print("|---|---|---|---|---|---|---|---|")
    for s in SIZES:
        for n in (1, 2, 4, 8):
            k = "t%d-%d" % (n, s)
            v = [best.get((a, k)) for a in ALLOCS]
            one = [best.get((a, "t1-%d" % s)) for a in ALLOCS]
            sc = lambda i: "%.2f" % (v[i] / one[i]) if v[i] and one[i] else "-"  # noqa: E731
            ratio = "%.2fx" % (v[2] / v[0]) if v[0] and v[2] else "-"
            print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (name(s), n, *("-" if x is None else x for x in v), ratio, sc(0), sc(2)))


if __name__ == "__main__":
    main()
