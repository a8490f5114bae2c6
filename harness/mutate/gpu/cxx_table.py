#!/usr/bin/env python3
"""The C++ allocator's mutants' outcomes (cxx_mutants.sh's $OUT): which checkers killed each, judged against
job 000 (the unmutated source, same run). Prints a Markdown table and writes $OUT/cxx-mutants.jsonl.

  python3 harness/mutate/gpu/cxx_table.py OUT

A checker kills a mutant when it fails where 000 passed: smoke's "ok" false (or no result); an eco test that
passed on 000 failing, or a figure of eco's stats differing from 000's; a PyTorch suite test that passed on 000
failing or erroring (the suite timing out counts as its tests not passing); an ipc probe check (fork, ipc)
that passed on 000 failing or missing."""
import json
import os
import sys
import xml.etree.ElementTree as ET

# eco stats figures that are not the allocator's answers: timings, the free memory other processes leave (the
# out-of-memory text), the matmul of random data
VOLATILE = {"wall_s", "oom_text", "matmul", "torch", "conf", "mode", "backend", "alloc", "test", "error"}


def last_json(path):
    try:
        lines = [l for l in open(path) if l.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def eco(path):
    out = {}
    try:
        for l in open(path):
            if l.strip():
                r = json.loads(l)
                out[r.get("test")] = r
    except (OSError, ValueError):
        pass
    return out


def suite(path):
    res = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return res
    for tc in root.iter("testcase"):
        name = tc.get("classname", "") + "::" + tc.get("name", "")
        bad = any(c.tag in ("failure", "error") for c in tc)
        skipped = any(c.tag == "skipped" for c in tc)
        res[name] = "skip" if skipped else ("fail" if bad else "pass")
    return res


def read(d):
    st = open(os.path.join(d, "status")).read().strip() if os.path.exists(os.path.join(d, "status")) else "not run"
    ipc = {}
    try:
        for l in open(os.path.join(d, "ipc.jsonl")):
            if l.startswith("{"):
                r = json.loads(l)
                ipc[r.get("check")] = bool(r.get("ok"))
    except (OSError, ValueError):
        pass
    return dict(status=st, smoke=last_json(os.path.join(d, "smoke.jsonl")), eco=eco(os.path.join(d, "eco.jsonl")),
                suite=suite(os.path.join(d, "suite.xml")), ipc=ipc, ipc_ran=os.path.exists(os.path.join(d, "ipc.rc")))


def main():
    out = sys.argv[1]
    keys = {}
    if os.path.exists(os.path.join(out, "mutants.tsv")):
        for l in open(os.path.join(out, "mutants.tsv")):
            n, f, k = l.rstrip("\n").split("\t")
            keys[n] = k
    pre = {}
    if os.path.exists(os.path.join(out, "precheck.tsv")):
        for l in open(os.path.join(out, "precheck.tsv")):
            p = l.rstrip("\n").split("\t")
            pre[p[0]] = p[1]
    base = read(os.path.join(out, "000"))
    if base["status"] != "done":
        sys.exit("cxx_table.py: job 000 (the unmutated source) did not finish: %s" % base["status"])
    base_pass = {t for t, v in base["suite"].items() if v == "pass"}
    rows = []
    for n in sorted(keys):
        r = dict(n=n, key=keys[n])
        if pre.get(n) == "invalid":
            r["status"] = "invalid (does not compile: precheck)"
            rows.append(r)
            continue
        m = read(os.path.join(out, n)) if os.path.isdir(os.path.join(out, n)) else dict(status="not run")
        r["status"] = m["status"]
        if m["status"] != "done":
            rows.append(r)
            continue
        killed, why = [], {}
        s = m["smoke"]
        if not (s and s.get("ok")) and (base["smoke"] or {}).get("ok"):
            killed.append("smoke")
            why["smoke"] = [k for k, v in ((s or {}).get("checks") or {}).items() if not v] or ["no result"]
        e_bad = []
        for t, b in base["eco"].items():
            me = m["eco"].get(t)
            if b.get("ok") and not (me and me.get("ok")):
                e_bad.append("%s failed" % t)
            elif t == "stats" and me:
                diff = sorted(k for k in set(b) | set(me) if k not in VOLATILE and b.get(k) != me.get(k))
                if diff:
                    e_bad.append("stats differ: " + ",".join(diff[:6]))
        if e_bad:
            killed.append("eco")
            why["eco"] = e_bad
        failed = sorted(t for t in base_pass if m["suite"].get(t) != "pass")
        if failed:
            killed.append("suite")
            why["suite"] = [f.split("::")[-1] for f in failed[:5]] + (["... %d in all" % len(failed)] if len(failed) > 5 else [])
        if m["ipc_ran"]:
            bad = [c for c, ok in base["ipc"].items() if ok and not m["ipc"].get(c)]
            if bad:
                killed.append("ipc")
                why["ipc"] = bad
        else:
            why["ipc"] = ["not run"]
        r.update(killed_by=killed, why=why)
        rows.append(r)
    with open(os.path.join(out, "cxx-mutants.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    done = [r for r in rows if r["status"] == "done"]
    kill = [r for r in done if r["killed_by"]]
    two = [r for r in done if len(r["killed_by"]) >= 2]
    print("| # | mutant | killed by | what failed |")
    print("|---|---|---|---|")
    for r in rows:
        if r["status"] != "done":
            print("| %s | `%s` | %s | |" % (r["n"], r["key"], r["status"]))
        else:
            print("| %s | `%s` | %s | %s |" % (r["n"], r["key"], ", ".join(r["killed_by"]) or "**survived**",
                                                "; ".join("%s: %s" % (k, ", ".join(v)) for k, v in r["why"].items())))
    print()
    print("000 (unmutated): smoke ok=%s, eco %s, suite %d pass of %d, ipc %s" % (
        (base["smoke"] or {}).get("ok"), {t: v.get("ok") for t, v in base["eco"].items()}, len(base_pass),
        len(base["suite"]), base["ipc"]))
    if done:
        print("%d run: %d killed (%.0f%%), %d by two checkers or more (%.0f%%); per checker: %s" % (
            len(done), len(kill), 100.0 * len(kill) / len(done), len(two), 100.0 * len(two) / len(done),
            ", ".join("%s %d" % (c, sum(c in r["killed_by"] for r in done)) for c in ("smoke", "eco", "suite", "ipc"))))


if __name__ == "__main__":
    main()
