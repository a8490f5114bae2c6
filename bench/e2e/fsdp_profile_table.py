#!/usr/bin/env python3
"""The FSDP2 (or DDP) profile table of issue 16 from train.py --profile results (run.sh PROFILE=N, fsdp/ddp):
one column per allocator (native, expandable_segments, gmlake), one row per figure, every count per step.

  python3 fsdp_profile_table.py e2e.jsonl > fsdp-profile.md
  python3 fsdp_profile_table.py e2e.jsonl --config ddp > ddp-profile.md

Rows: step time (median of the timed steps after the warm-up) and its ratio to native, peak reserved, losses
equal to native's, PyTorch's allocator counters over the timed steps (device allocs and frees, synchronisations
of all streams, retries), gmlake's driver calls and their wall time by kind (GMLAKE_TIME_DRIVER=1), then over the
profiled steps: the CUDA runtime calls that synchronise or order streams (torch.profiler), allocations and bytes
on each stream (PyTorch's memory history), and the runtime calls that cost the most CPU time.
"""
import argparse
import json
import sys

ORDER = ("native", "expandable", "gmlake")
GiB = float(1 << 30)


def load(path, config):
    runs = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("config") == config and r.get("kind") == "train" and (r.get("profile") or not r.get("ok")):
                runs[r["alloc"]] = r  # the last run of each allocator
    return runs


def fmt(v, digits=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return ("%." + str(digits) + "f") % v
    return str(v)


def table(runs):
    allocs = [a for a in ORDER if a in runs]
    ok = {a: runs[a] for a in allocs if runs[a].get("ok")}
    rows = []

    def row(name, f, digits=1):
        vals = []
        for a in allocs:
            try:
                vals.append(fmt(f(ok[a]), digits) if a in ok else "failed")
            except (KeyError, TypeError, ZeroDivisionError):
                vals.append("–")
        if any(v not in ("–", "0", "0.0", "0.00", "0.000") for v in vals):
            rows.append("| %s | %s |" % (name, " | ".join(vals)))

    def prof(r):
        return r["profile"]

    def per(r, k):
        return (prof(r)["per_step"] or {}).get(k)

    base = ok.get("native")
    row("world size", lambda r: r.get("world_size"))
    row("step time, median (s)", lambda r: r["median_step_s"], 4)
    if base:
        row("step time vs native", lambda r: "%+.1f%%" % (100 * (r["median_step_s"] / base["median_step_s"] - 1)))
        row("losses equal to native's", lambda r: "yes" if r["losses"] == base["losses"] else "max abs diff %.2g" % max(
            abs(x - y) for x, y in zip(r["losses"], base["losses"])))
    row("peak reserved (GiB)", lambda r: r["peak_reserved"] / GiB, 2)
    row("peak allocated (GiB)", lambda r: r["peak_allocated"] / GiB, 2)
    row("profiled step, wall (s)", lambda r: prof(r)["profiled_step_s"], 4)
    row("GPU busy per step, summed over streams (ms)", lambda r: prof(r)["gpu_busy_us"] / 1000, 1)
    rows.append("| **allocator, per timed step** | %s |" % " | ".join("" for _ in allocs))
    for k, name in (("torch.allocation.all.allocated", "allocations (memory_stats)"),
                    ("torch.segment.all.allocated", "segments created"),
                    ("torch.num_device_alloc", "device allocs (cudaMalloc / cuMemCreate)"),
                    ("torch.num_device_free", "device frees"),
                    ("torch.num_sync_all_streams", "synchronisations of all streams"),
                    ("torch.num_alloc_retries", "alloc retries")):
        row(name, lambda r, k=k: per(r, k))
    kinds = sorted({k[len("calls."):] for r in ok.values() for k, v in (prof(r)["per_step"] or {}).items()
                    if k.startswith("calls.") and v})
    if kinds:
        rows.append("| **gmlake driver calls, per timed step: count / ms** | %s |" % " | ".join("" for _ in allocs))
        for kd in kinds:
            row(kd, lambda r, kd=kd: "%s / %.3f" % (fmt(per(r, "calls." + kd)), 1000 * (per(r, "seconds." + kd) or 0))
                if per(r, "calls." + kd) is not None else None)
    rows.append("| **CUDA runtime calls, per profiled step** | %s |" % " | ".join("" for _ in allocs))
    for k in sorted({k for r in ok.values() for k in prof(r).get("sync", {})}):
        row(k, lambda r, k=k: "%s / %.1f us" % (fmt(prof(r)["sync"][k]), prof(r)["runtime_calls"].get(k, {}).get("us", 0))
            if prof(r)["sync"].get(k) else None)
    rows.append("| **allocations per profiled step, by stream: count (GiB)** | %s |" % " | ".join("" for _ in allocs))
    streams = sorted({s for r in ok.values() for s in (prof(r).get("by_stream") or {})})
    for s in streams:
        row(s, lambda r, s=s: "%s (%.2f)" % (fmt(prof(r)["by_stream"][s].get("alloc", 0)),
                                             prof(r)["by_stream"][s].get("alloc_bytes", 0) / GiB)
            if s in (prof(r).get("by_stream") or {}) else None)
    for s in streams:
        for act in ("segment_alloc", "segment_map", "segment_free", "segment_unmap"):
            row("%s: %s" % (s, act), lambda r, s=s, act=act: (prof(r).get("by_stream") or {}).get(s, {}).get(act))
    head = "| per step | %s |\n|---|%s\n" % (" | ".join("expandable_segments" if a == "expandable" else a for a in allocs),
                                             "---|" * len(allocs))
    out = head + "\n".join(rows) + "\n"
    top = []
    for a in allocs:
        if a in ok:
            calls = list(prof(ok[a])["runtime_calls"].items())[:8]
            top.append("- %s: %s" % (a, ", ".join("%s %s× %.0f us" % (k, fmt(v["count"]), v["us"]) for k, v in calls)))
        else:
            top.append("- %s: failed: %s" % (a, runs[a].get("error", "?")[:300]))
    return out + "\nCUDA runtime calls by CPU time per profiled step (torch.profiler):\n\n" + "\n".join(top) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="train.py's JSON lines (bench/e2e/run.sh: $OUT/e2e.jsonl)")
    p.add_argument("--config", default="fsdp", help="the training configuration's runs to tabulate (fsdp, ddp)")
    a = p.parse_args()
    runs = load(a.results, a.config)
    if not runs:
        raise SystemExit("%s holds no %s run made with --profile" % (a.results, a.config))
    sys.stdout.write(table(runs))


if __name__ == "__main__":
    main()
