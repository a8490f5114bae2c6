#!/usr/bin/env python3
"""Writes snapshot.pickle: a small dict shaped like torch.cuda.memory._snapshot() (what
torch.cuda.memory._dump_snapshot pickles), for harness/snapshot/pickle_test.go. Run from this folder:
python3 make_snapshot.py. No torch needed; the expected trace is in pickle_test.go."""
import pickle

S0 = 0            # the default stream, as PyTorch records it
S1 = 94171235460  # a side stream (a cudaStream_t value)
BASE = 0x7F2A_0000_0000  # device addresses above 2^32 (pickled as LONG1)
MiB = 1 << 20


def ev(action, addr, size, stream=S0, **kw):
    d = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": 1000,
         "frames": [{"filename": "train.py", "line": 42, "name": "forward"}]}
    d.update(kw)
    return d


dev0 = [
    # a block allocated before the trace window: only its free is recorded
    ev("free_requested", BASE + 64 * MiB, 3 * MiB),
    ev("free_completed", BASE + 64 * MiB, 3 * MiB),
    ev("segment_alloc", BASE, 20 * MiB),
    ev("alloc", BASE, 1000),
    ev("alloc", BASE + 512, 5 * MiB),
    ev("alloc", BASE + 80 * MiB, 8 * MiB, S1),
    ev("free_requested", BASE, 1000),
    ev("free_completed", BASE, 1000),
    # a cross-stream free: requested, other work, completed later
    ev("free_requested", BASE + 80 * MiB, 8 * MiB, S1),
    ev("alloc", BASE + 100 * MiB, 2 * MiB),
    ev("free_completed", BASE + 80 * MiB, 8 * MiB, S1),
    # the address is reused by a new allocation
    ev("alloc", BASE, 700),
    ev("snapshot", 0, 0),
    ev("oom", 0, 30 * MiB, device_free=1 * MiB),
    ev("segment_free", BASE + 200 * MiB, 20 * MiB),
    # pre-window block whose free_requested fell out of the window
    ev("free_completed", BASE + 300 * MiB, 4 * MiB, S1),
]
dev1 = [ev("alloc", BASE, 512)]  # a quieter device: the reader picks device 0 by default

snap = {
    "segments": [{"device": 0, "address": BASE, "total_size": 20 * MiB, "stream": S0,
                  "segment_type": "large", "allocated_size": 5 * MiB + 1024, "active_size": 5 * MiB + 1024,
                  "blocks": [{"address": BASE, "size": 1024, "requested_size": 700, "state": "active_allocated"}]}],
    "device_traces": [dev0, dev1],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1},
}
with open("snapshot.pickle", "wb") as f:
    pickle.dump(snap, f, protocol=4)

# A snapshot whose third entry has no "size": the reader must name device_traces[0][2].
broken = {"segments": [], "device_traces": [[ev("alloc", BASE, 512), ev("free_completed", BASE, 512),
                                             {"action": "alloc", "addr": BASE, "stream": S0}]]}
with open("snapshot_bad_entry.pickle", "wb") as f:
    pickle.dump(broken, f, protocol=2)
