#!/usr/bin/env python3
"""Summarizes the JSON lines of bench/e2e (train, maxbatch, micro, smoke) as Markdown tables, checks the
targets of issue 8, and compares the losses of the allocators run by run.

  python3 summarize.py results.jsonl [more.jsonl ...] [--md summary.md]

Targets checked (reported, never fatal): peak reserved with gmlake <= expandable_segments on every
configuration; gmlake's median step time within 3% of native; the hot path through the C ABI no slower than
PyTorch's native allocator (ratio <= 1); the losses of every allocator equal to native's, step by step.
"""
import argparse
import json
import sys

GiB = float(1 << 30)
ORDER = {"native": 0, "expandable": 1, "gmlake": 2}


def load(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if line:
                        try:
                            rows.append(json.loads(line))
                        except ValueError as e:
                            print("%s:%d: skipped a malformed line (%s)" % (p, n, e), file=sys.stderr)
        except OSError as e:
            print("skipped %s: %s" % (p, e), file=sys.stderr)
    return rows


def gib(x):
    return "-" if x is None else "%.2f" % (x / GiB)


def pct(x):
    return "-" if x is None else "%.1f%%" % (100 * x)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def compare_losses(ref, other):
    if not ref or not other or len(ref) != len(other):
        return "n/a", None
    diff = max(abs(a - b) for a, b in zip(ref, other))
    rel = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(ref, other))
    if diff == 0:
        return "identical", 0.0
    return ("close (max rel %.1e)" % rel if rel < 1e-3 else "DIFFER (max rel %.1e)" % rel), rel


def summarize(rows):
    lines, verdicts = [], []
    smoke = [r for r in rows if r.get("kind") == "smoke"]
    for r in smoke:
        lines.append("Smoke test (gmlake inside PyTorch): %s, mode %s, OOM surfaces as %s; checks: %s" % (
            "PASS" if r.get("ok") else "FAIL", r.get("mode"), r.get("oom_type"),
            ", ".join("%s=%s" % (k, "ok" if v else "FAILED") for k, v in (r.get("checks") or {}).items())
            or r.get("error")))
        lines.append("")

    train = [r for r in rows if r.get("kind") == "train"]
    configs = sorted({r["config"] for r in train})
    if train:
        body = []
        for c in configs:
            runs = sorted((r for r in train if r["config"] == c), key=lambda r: ORDER.get(r["alloc"], 9))
            by = {r["alloc"]: r for r in runs if r.get("ok")}
            nat = by.get("native")
            for r in runs:
                if not r.get("ok"):
                    body.append([c, r["alloc"], "FAILED: " + r.get("error", "?")[:120]] + [""] * 9)
                    continue
                dstep = "-"
                if nat and nat.get("median_step_s"):
                    dstep = "%+.1f%%" % (100 * (r["median_step_s"] / nat["median_step_s"] - 1))
                loss = compare_losses(nat.get("losses"), r.get("losses"))[0] if nat and r is not nat else "reference"
                body.append([c, r["alloc"] + ("/" + r["policy"] if r.get("policy") not in (None, "gmlake") else ""),
                             gib(r.get("peak_reserved")), gib(r.get("peak_allocated")), gib(r.get("peak_requested")),
                             pct(r.get("frag")), pct(r.get("frag_requested")), "%.3f" % r["median_step_s"], dstep,
                             loss, r.get("driver_calls", "-"), r.get("stitches", "-")])
            gm, ex = by.get("gmlake"), by.get("expandable")
            if gm and ex:
                ok = gm["peak_reserved"] <= ex["peak_reserved"]
                verdicts.append("%s: gmlake peak reserved %s GiB vs expandable %s GiB: %s" % (
                    c, gib(gm["peak_reserved"]), gib(ex["peak_reserved"]), "MET" if ok else "NOT MET"))
            if gm and nat:
                ratio = gm["median_step_s"] / nat["median_step_s"]
                verdicts.append("%s: gmlake median step %.3f s vs native %.3f s (%+.1f%%): %s" % (
                    c, gm["median_step_s"], nat["median_step_s"], 100 * (ratio - 1),
                    "MET" if ratio <= 1.03 else "NOT MET"))
            for r in runs:
                if r.get("ok") and nat and r is not nat:
                    verdict, rel = compare_losses(nat.get("losses"), r.get("losses"))
                    verdicts.append("%s: losses %s vs native: %s" % (c, r["alloc"], verdict))
        lines.append("Training runs (peak memory in GiB; frag = 1 - peak allocated / peak reserved; frag_req = "
                     "1 - peak requested / peak reserved; step = median seconds per step after warm-up)")
        lines.append("")
        lines.append(table(["config", "allocator", "peak reserved", "peak allocated", "peak requested", "frag",
                            "frag_req", "step s", "step vs native", "losses vs native", "driver calls",
                            "stitches"], body))
        lines.append("")

    for r in (r for r in rows if r.get("kind") == "record"):
        lines.append("Recorded trace (gmlake_torch.record): %s" % (
            "%s, %s allocations and %s frees over %s steps of %s" % (r.get("trace"), r.get("trace_allocs"),
                                                                  r.get("trace_frees"), r.get("steps"), r.get("config"))
            if r.get("ok") else "FAILED: " + str(r.get("error"))))
        lines.append("")

    mb = [r for r in rows if r.get("kind") == "maxbatch"]
    if mb:
        body = []
        for r in sorted(mb, key=lambda r: (r["config"], ORDER.get(r["alloc"], 9))):
            if not r.get("ok"):
                body.append([r["config"], r["alloc"], "FAILED: " + r.get("error", "?")[:120], "", "", ""])
                continue
            body.append([r["config"], r["alloc"], r.get("max_batch"), r.get("first_failing_batch") or "-",
                         "%.0f GiB" % r.get("budget_gib", 0),
                         " ".join("%s:%s" % (b, s) for b, s in r.get("probes", []))])
        lines.append("Largest batch that trains (memory budget: the GPU filled to leave this much free)")
        lines.append("")
        lines.append(table(["config", "allocator", "max batch", "first failing", "budget", "probes"], body))
        lines.append("")
        by = {(r["config"], r["alloc"]): r for r in mb if r.get("ok")}
        for c in sorted({r["config"] for r in mb}):
            g, e, n = by.get((c, "gmlake")), by.get((c, "expandable")), by.get((c, "native"))
            if g and (e or n):
                verdicts.append("%s: largest batch gmlake %s, expandable %s, native %s" % (
                    c, g["max_batch"], e and e["max_batch"], n and n["max_batch"]))

    micro = [r for r in rows if r.get("kind") == "micro"]
    for r in micro:
        if not r.get("ok"):
            lines.append("Microbenchmark (%s) FAILED: %s" % (r.get("conf"), r.get("error")))
            continue
        pats = [k.split(".", 1)[1] for k in r if k.startswith("native.")]
        body = []
        for pat in pats:
            body.append([pat, r.get("native." + pat), r.get("native_dataptr." + pat, "-"), r.get("gmlake." + pat),
                         r.get("pluggable." + pat, "-"), r.get("ratio_gmlake_vs_native." + pat)])
            ratio = r.get("ratio_gmlake_vs_native." + pat)
            if ratio is not None:
                verdicts.append("hot path %s (PyTorch %s): gmlake/native = %.2f: %s" % (
                    pat, r.get("conf"), ratio, "MET" if ratio <= 1.0 else "NOT MET"))
        lines.append("Hot path, ns per alloc+free pair in C++ (PyTorch allocator: %s; gmlake policy %s)" % (
            r.get("conf"), r.get("policy")))
        lines.append("")
        lines.append(table(["pattern", "PyTorch raw_alloc", "PyTorch raw_allocate", "gmlake C ABI",
                            "gmlake via CUDAPluggableAllocator", "gmlake / PyTorch"], body))
        lines.append("")

    if verdicts:
        lines.append("Targets")
        lines.append("")
        lines += ["- " + v for v in verdicts]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--md", help="also write the summary to this file")
    a = p.parse_args()
    text = summarize(load(a.files))
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
