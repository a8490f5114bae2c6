#!/usr/bin/env python3
"""Prints the ecosystem table of bench/e2e/ecosystem.sh from its outputs (eco.jsonl, train.jsonl, micro.jsonl
in the folder given): one row per check, one column per allocator (native, expandable, gmlake).

  python3 ecosystem_table.py OUT_DIR
"""
import json
import os
import sys

ALLOCS = ("native", "expandable", "gmlake")
GiB = float(1 << 30)


def load(path):
    rows = []
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    return rows


def gib(v):
    return "-" if v is None else "%.2f" % (v / GiB)


def main():
    d = sys.argv[1]
    eco, loops = {}, {}
    for r in load(os.path.join(d, "eco.jsonl")):
        eco[(r["alloc"], r["test"])] = r
        if r["test"] == "pyloop" and r.get("ok"):  # several processes: the best of each (process-to-process noise)
            best = loops.setdefault(r["alloc"], dict(r, runs=0))
            best["runs"] += 1
            for k, v in r.items():
                if k.startswith("ns_"):
                    best[k] = min(best[k], v)
    for a, r in loops.items():
        eco[(a, "pyloop")] = r
    train = {r.get("alloc"): r for r in load(os.path.join(d, "train.jsonl"))}
    micro = {r.get("alloc"): r for r in load(os.path.join(d, "micro.jsonl"))}
    rows = []

    def row(name, f):
        cells = []
        for a in ALLOCS:
            try:
                cells.append(str(f(a)))
            except Exception as e:  # noqa: BLE001  (a missing or failed run)
                r = eco.get((a, name.split(":")[0].strip()))
                cells.append("ERR " + (r.get("error", "")[:80] if r else type(e).__name__))
        rows.append("| %s | %s |" % (name, " | ".join(cells)))

    def e(a, t):
        r = eco[(a, t)]
        if "error" in r:
            raise KeyError(r["error"])
        return r

    def ok(a, t):
        return "ok" if e(a, t)["ok"] else "FAILED"

    print("gmlake mode: %s; torch %s\n" % (eco.get(("gmlake", "stats"), {}).get("mode"),
                                           next(iter(eco.values()), {}).get("torch")))
    print("| check | native | expandable | gmlake |\n|---|---|---|---|")
    nat = eco.get(("native", "stats"), {}).get("keys")
    row("stats: memory_stats keys (same set as native)",
        lambda a: "%d%s" % (e(a, "stats")["n_keys"], "" if e(a, "stats")["keys"] == nat else " DIFFERENT"))
    for k in ("allocated_bytes.all.current", "requested_bytes.all.current", "reserved_bytes.all.current",
              "allocated_bytes.all.peak", "reserved_bytes.all.peak", "allocation.all.current",
              "allocation.all.allocated", "segment.all.current", "num_device_alloc", "num_ooms", "max_split_size"):
        row("stats: " + k, lambda a, k=k: e(a, "stats")[k])
    row("stats: consistent (current = allocated - freed; requested <= allocated <= reserved)",
        lambda a: e(a, "stats")["consistent"])
    row("stats: reset_peak / reset_accumulated / memory_summary lines",
        lambda a: "%s / %s / %s" % (e(a, "stats")["peak_after_reset_equals_current"],
                                    e(a, "stats")["accumulated_after_reset"], e(a, "stats")["summary_lines"]))
    row("stats: get_per_process_memory_fraction", lambda a: e(a, "stats")["memory_fraction"])
    row("OOM: type, text starts", lambda a: "%s: %s" % (e(a, "stats").get("oom_type"),
                                                        e(a, "stats").get("oom_text", "")[:60]))
    row("OOM: allocation after it", lambda a: e(a, "stats")["alloc_after_oom"])
    row("HF Trainer skip_memory_metrics=False: train_loss", lambda a: "%.4f" % e(a, "hf")["train_loss"])
    row("HF Trainer: train_mem_gpu_peaked_delta / alloc_delta (MB)",
        lambda a: "%s / %s" % (e(a, "hf")["mem"].get("train_mem_gpu_peaked_delta", 0) // (1 << 20),
                               e(a, "hf")["mem"].get("train_mem_gpu_alloc_delta", 0) // (1 << 20)))
    row("accelerate find_executable_batch_size: batch (tries)",
        lambda a: "%s (%s)" % (e(a, "accel")["batch"], ",".join(map(str, e(a, "accel")["tries"]))))
    row("Lightning DeviceStatsMonitor: memory keys logged", lambda a: e(a, "lightning")["device_stats_keys"])
    row("Lightning batch-size finder (power, 6% cap)", lambda a: e(a, "lightning")["batch_found"])
    row("cudnn.benchmark resnet18: last loss / step ms / peak reserved GiB",
        lambda a: "%.4f / %.1f / %s" % (e(a, "cudnn")["losses"][-1], 1e3 * e(a, "cudnn")["step_s"],
                                        gib(e(a, "cudnn")["peak_reserved"])))
    row("CUDA graph with intermediates: = eager (max diff), other tensors intact",
        lambda a: "%s (%.1e), %s" % (e(a, "graphs")["graph_ok"], e(a, "graphs")["max_diff"],
                                     e(a, "graphs")["noise_intact"]))
    row("torch.cuda.MemPool + use_mem_pool", lambda a: e(a, "graphs")["mempool"])
    row("torch.compile reduce-overhead: = eager (max diff), last loss",
        lambda a: "%s (%.1e), %.5f" % (ok(a, "compile"), e(a, "compile")["max_diff_vs_eager"],
                                       e(a, "compile")["losses"][-1]))
    row("snapshot: trace entries / actions / allocs with frames",
        lambda a: "%d / %s / %d" % (e(a, "snapshot")["trace_entries"], ",".join(e(a, "snapshot")["actions"]),
                                    e(a, "snapshot")["frames_on_alloc"]))
    row("snapshot -> _memory_viz trace_plot / segment_plot (bytes)",
        lambda a: "%s / %s" % (e(a, "snapshot")["memory_viz"]["trace_plot"],
                               e(a, "snapshot")["memory_viz"]["segment_plot"]))
    row("snapshot -> gmlake replay: peak live (= trace's own) GiB",
        lambda a: "%s (%s)" % (gib(e(a, "snapshot")["replay"]["gmlake"]["peak_live"]),
                               gib(e(a, "snapshot")["trace_peak_live"])))
    row("snapshot -> gmlake replay: peak reserved caching / expandable / gmlake GiB",
        lambda a: " / ".join(gib(e(a, "snapshot")["replay"][p]["peak_reserved"])
                             for p in ("caching", "expandable", "gmlake")))
    row("snapshot: max_memory_allocated of the recorded run GiB", lambda a: gib(e(a, "snapshot")["max_memory_allocated"]))
    row("OOM observer calls", lambda a: e(a, "snapshot")["oom_observer_calls"])
    row("max sequence length in the budget (steps of 128)",
        lambda a: "%d (%s GiB)" % (e(a, "maxseq")["max_seq"], e(a, "maxseq")["budget_gib"]))
    for s in (512, 1 << 20, 64 << 20):
        row("Python torch.empty+del, ns per pair, %d B (best of N processes; gmlake: cpp / pluggable)" % s,
            lambda a, s=s: "%s (%d)%s" % (e(a, "pyloop")["ns_%d" % s], e(a, "pyloop").get("runs", 1),
                                          " / %s" % eco[("gmlake-pluggable", "pyloop")]["ns_%d" % s]
                                          if a == "gmlake" and "ns_%d" % s in eco.get(("gmlake-pluggable", "pyloop"), {})
                                          else ""))
    nat_t = train.get("native", {})
    row("training ckpt 0.93B: peak reserved GiB", lambda a: gib(train[a]["peak_reserved"]))
    row("training: median step s (vs native)",
        lambda a: "%.3f (%+.1f%%)" % (train[a]["median_step_s"],
                                      100 * (train[a]["median_step_s"] / nat_t["median_step_s"] - 1)))
    row("training: losses equal native (max rel diff)",
        lambda a: "%.1e" % max(abs(x - y) / max(abs(y), 1e-9) for x, y in zip(train[a]["losses"], nat_t["losses"])))
    for pat in ("pair-512", "pair-1048576", "mixed"):
        row("microbench: PyTorch's allocator in use, raw_allocate ns, %s" % pat,
            lambda a, pat=pat: micro[a]["native_dataptr." + pat])
    row("microbench: gmlake C ABI ns, pair-512", lambda a: micro[a]["gmlake.pair-512"])
    row("microbench: pluggable around gmlake ns, pair-512", lambda a: micro[a].get("pluggable.pair-512", "-"))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
