"""What the per-tensor benchmarks of bench/torch share (breakdown.py, pygap.py, hotpath_bench.py and their tables):
the sizes they time, how a size is named in a table, and the Python loop itself."""
import time

SIZES = (512, 1 << 20, 8 << 20, 256 << 20)


def name(s):
    """A size as the tables write it: 512 B, 1 MiB, ..."""
    return "%d MiB" % (s >> 20) if s >= 1 << 20 else "%d B" % s


def py_pair(torch, size, n):
    """ns per torch.empty(size, dtype=uint8, device="cuda") then drop, from Python, after 1000 warm-up pairs."""
    d, u8, empty = torch.device("cuda"), torch.uint8, torch.empty
    for _ in range(1000):
        empty(size, dtype=u8, device=d)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        empty(size, dtype=u8, device=d)
    return (time.perf_counter_ns() - t0) / n
