#!/usr/bin/env python3
"""The host cache's hit rate on the mixed pattern, simulated (docs/results/hotpath-breakdown.md, session 29).

  python3 bench/abi/hostcache_sim.py [TRACE]      # default testdata/traces/llama1b-ckpt.trace.gz

The mixed pattern of bench/abi/pair.c and bench/torch/hotpath_bench.py: the trace's allocations 1000-5095 as
requested, a ring of 64 live, the oldest freed first, one stream. The host cache (capi/hostcache.c) keeps up to
32 freed blocks and serves a request whose size rounds (to 512 B) to a freed block's; a miss crosses into Go,
which replays the log and empties the freed list. The simulation prints the hit rate of that design and of one
where the freed list survives a miss (the blocks stay lent to the cache across crossings), for lists of 32, 64
and 128. The first figure is checked against the library's own counters (host_cache_hits / num_allocs through
gmlake_torch on the simulated device: 18.4% in session 29), so the second is that design's bound, simulated
(the variant built in session 29 reached 80%, and was slower: docs/results/hotpath-breakdown.md).
"""
import gzip
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def trace_sizes(path, first=1000, count=4096):
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            p = line.split()
            if p and p[0] == "a" and int(p[1]) >= first:
                out.append(int(p[2]))
                if len(out) == count:
                    break
    return out


def hit_rate(sizes, cap, persist, live_n=64, rounds=6):
    """Hits per allocation after the first pass (the warm-up), as the cache would serve them."""
    cls = lambda s: (s + 511) // 512 * 512  # noqa: E731  the engine's rounding of a small request
    freed, live, hits, n, k = [], [None] * live_n, 0, 0, 0
    for rnd in range(rounds):
        for s in sizes:
            if live[k % live_n] is not None:
                freed.append(live[k % live_n])
                if len(freed) > cap:
                    freed.pop(0)  # the oldest goes to the engine
            c = cls(s)
            hit = next((i for i in range(len(freed) - 1, -1, -1) if freed[i] == c), None)
            n += rnd > 0
            if hit is not None:
                freed.pop(hit)
                hits += rnd > 0
            elif not persist:
                freed = []  # the miss's crossing replays the log and empties the freed list
            live[k % live_n] = c
            k += 1
    return hits / n


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "testdata", "traces", "llama1b-ckpt.trace.gz")
    sizes = trace_sizes(path)
    print("%d sizes, %d distinct (rounded to 512 B: %d)" % (len(sizes), len(set(sizes)), len({(s + 511) // 512 for s in sizes})))
    print("| freed list | hit rate, emptied at a miss (today) | hit rate, kept across a miss |")
    print("|---|---|---|")
    for cap in (32, 64, 128):
        print("| %d | %.1f%% | %.1f%% |" % (cap, 100 * hit_rate(sizes, cap, False), 100 * hit_rate(sizes, cap, True)))


if __name__ == "__main__":
    main()
