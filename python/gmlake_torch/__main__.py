"""python -m gmlake_torch [-m module | script.py] ARGS: runs a training program with gmlake as PyTorch's CUDA
allocator, unchanged. Works under any launcher that runs `python -m`, e.g. `torchrun --nproc-per-node 8 -m
gmlake_torch train.py --lr 1e-4`. gmlake is enabled when the program first imports torch (so the program's
own environment settings before that are honoured); GMLAKE_MODE, GMLAKE_POLICY and the other GMLAKE_
variables configure it as usual. The settings are checked (the library's own check) before the program runs,
and again when it imports torch; a bad one is one line on stderr (gmlake_torch.ConfigError: ...) and exit
status 2."""
import os
import runpy
import sys

USAGE = "usage: python -m gmlake_torch [-m module | script.py] [args...]"


def main(argv):
    """Runs the program of argv; a bad setting is one line on stderr and exit status 2 (before the program
    runs, or when it imports torch after changing its environment)."""
    from . import GMLakeConfigError
    try:
        return _run(argv)
    except GMLakeConfigError as e:
        print("gmlake_torch.ConfigError: %s" % e, file=sys.stderr)
        return 2


def _run(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__, file=sys.stderr)
        return 0 if argv else 2
    from . import _autoenable
    _autoenable.install(strict=True)  # checks the settings, also when GMLAKE=1's hook ran at start
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        path = argv[0]
        if not os.path.isfile(path):
            print("gmlake_torch: %s: no such file\n%s" % (path, USAGE), file=sys.stderr)
            return 2
        sys.argv = argv[:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python script.py` does
        runpy.run_path(path, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
