"""One place that writes a benchmark result: printed after its tag (run.sh greps for it) and appended as a
JSON line to the results file, so that a run cut short still leaves what it measured."""
import json


def emit(tag, res, out=None):
    line = json.dumps(res)
    print(tag + " " + line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
