#!/usr/bin/env python3
"""One table of PyTorch's allocator tests (bench/torch/pytorch_suite) under each allocator, from pytest's
JUnit XML files: a row per test, a column per allocator (pass, FAIL, skip, error), the counts, and the tests that
pass under native but not under another allocator, each with the first line of what pytest reported.

    pytorch_suite_table.py native=native.xml expandable=expandable.xml gmlake=gmlake.xml > table.md
"""
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    """Maps "Class.test" to (outcome, first line of the message) for one JUnit XML file."""
    res = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1] + "." + case.get("name", "")
        outcome, msg = "pass", ""
        for tag, label in (("failure", "FAIL"), ("error", "error"), ("skipped", "skip")):
            el = case.find(tag)
            if el is not None:
                outcome = label
                msg = (el.get("message") or el.text or "").strip().splitlines()
                msg = msg[0][:160] if msg else ""
                break
        res[name] = (outcome, msg)
    return res


def main(args):
    cols = []
    for a in args:
        label, _, path = a.partition("=")
        try:
            cols.append((label, outcomes(path)))
        except (OSError, ET.ParseError) as e:
            print(f"{label}: no results ({path}: {e})", file=sys.stderr)
            cols.append((label, {}))
    names = sorted(set().union(*(c[1].keys() for c in cols)))
    print("| test | " + " | ".join(c[0] for c in cols) + " |")
    print("| --- | " + " | ".join("---" for _ in cols) + " |")
    for n in names:
        print(f"| {n} | " + " | ".join(c[1].get(n, ("not run", ""))[0] for c in cols) + " |")
    print()
    print("| allocator | pass | FAIL | error | skip | not run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, res in cols:
        count = {k: 0 for k in ("pass", "FAIL", "error", "skip", "not run")}
        for n in names:
            count[res.get(n, ("not run", ""))[0]] += 1
        print(f"| {label} | " + " | ".join(str(count[k]) for k in ("pass", "FAIL", "error", "skip", "not run")) + " |")
    anchor = cols[0][1]
    for label, res in cols[1:]:
        lost = [n for n in names if anchor.get(n, ("",))[0] == "pass" and res.get(n, ("not run",))[0] != "pass"]
        print()
        print(f"Pass under {cols[0][0]}, not under {label}: {len(lost)}")
        for n in lost:
            o, m = res.get(n, ("not run", ""))
            print(f"- {n}: {o}: {m}")


if __name__ == "__main__":
    main(sys.argv[1:])
