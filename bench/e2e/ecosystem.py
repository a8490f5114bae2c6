#!/usr/bin/env python3
"""The PyTorch ecosystem under one allocator, in this process (bench/e2e/ecosystem.sh runs it once per allocator,
each in its own process, and prints the table). Issue 15, docs/pytorch.md.

  python3 ecosystem.py --alloc gmlake --tests stats,graphs,compile --out eco.jsonl

--alloc native | expandable | gmlake: native and expandable are PyTorch's own allocator (the runner sets
PYTORCH_CUDA_ALLOC_CONF for expandable); gmlake is enabled with no code change, as a user would: the runner
starts this script as `python3 -m gmlake_torch ecosystem.py ...` (so gmlake is enabled when torch is imported).
Each test appends one JSON line {"alloc", "test", "ok", ...figures} to --out and prints "ECO {json}"; a test that
raises is recorded with its error and the next test runs. Tests:
  stats      a fixed allocation pattern, then every torch.cuda memory API: memory_stats (its keys and values),
             memory_allocated / max_memory_*, reset_peak / reset_accumulated, memory_summary, mem_get_info,
             get_per_process_memory_fraction, an out-of-memory (its type and text) and allocation after it
  hf         HF Trainer (transformers) with skip_memory_metrics=False on a small random Llama: loss, memory metrics
  accel      accelerate.find_executable_batch_size from batch 4096 under a memory fraction cap: the batch found
  lightning  Lightning Trainer with DeviceStatsMonitor (memory_stats keys logged) and the batch-size finder
  cudnn      cudnn.benchmark=True convnet (torchvision resnet18) training steps: losses
  graphs     torch.cuda.graph capture of a training step with intermediates, replayed: the same results as eager;
             torch.cuda.MemPool + use_mem_pool
  replayfree a graph destroyed while its replay still runs (a captured sleep): the temporary it freed during the
             capture must stay mapped until the replay ends; the outputs are right and nothing faults
  compile    torch.compile(mode="reduce-overhead") on an MLP: losses against eager in the same process
  snapshot   _record_memory_history over training steps, _dump_snapshot -> torch.cuda._memory_viz (trace and
             segment plots) and -> `gmlake replay` (peaks), observers of out-of-memory
  maxseq     the largest sequence length (steps of 128 tokens) a Llama trains at, inside a memory budget
  pyloop     per-tensor cost from Python: a loop of torch.empty + del (ns per pair), a few sizes
"""
import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
GiB = 1 << 30
MiB = 1 << 20


def log(*a):
    print("[eco %s pid %d]" % (time.strftime("%H:%M:%S"), os.getpid()), *a, file=sys.stderr, flush=True)


def dev():
    import torch
    return torch.device("cuda", 0)


def reset():
    import torch
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


@contextlib.contextmanager
def fraction(f):
    """A memory cap by PyTorch's own API (every allocator honours it: gmlake through setMemoryFraction)."""
    import torch
    torch.cuda.set_per_process_memory_fraction(f, 0)
    try:
        yield
    finally:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0, 0)


def tiny_llama(hidden=512, layers=4, vocab=8000):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 4, num_hidden_layers=layers,
                      num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 64),
                      vocab_size=vocab, max_position_embeddings=16384)
    return LlamaForCausalLM(cfg)


# ---- tests ----

def t_stats(a):
    import torch
    d = dev()
    reset()
    keep = []
    sizes = [512, 1000, 4096, MiB - 7, MiB, 3 * MiB, 20 * MiB + 3, 100 * MiB]
    for i in range(40):
        t = torch.empty(sizes[i % len(sizes)], dtype=torch.uint8, device=d)
        if i % 3 == 0:
            keep.append(t)
        del t
    x = torch.randn(1024, 1024, device=d)
    y = (x @ x).sum().item()
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats()
    res = dict(keys=sorted(st), n_keys=len(st), matmul=y)
    for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "requested_bytes.all.current",
              "requested_bytes.all.peak", "reserved_bytes.all.current", "reserved_bytes.all.peak",
              "active_bytes.all.peak", "allocation.all.current", "allocation.all.allocated", "allocation.all.freed",
              "allocation.small_pool.current", "allocation.large_pool.current", "segment.all.current",
              "num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms", "max_split_size",
              "inactive_split_bytes.all.current"):
        res[k] = st.get(k)
    res["memory_allocated"] = torch.cuda.memory_allocated()
    res["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    res["memory_reserved"] = torch.cuda.memory_reserved()
    res["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    res["consistent"] = (st["allocation.all.current"] == st["allocation.all.allocated"] - st["allocation.all.freed"]
                         and st["allocated_bytes.all.current"] <= st["reserved_bytes.all.current"]
                         and st["requested_bytes.all.current"] <= st["allocated_bytes.all.current"])
    del keep
    torch.cuda.reset_peak_memory_stats()
    res["peak_after_reset_equals_current"] = (torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated())
    torch.cuda.reset_accumulated_memory_stats()
    res["accumulated_after_reset"] = torch.cuda.memory_stats()["allocation.all.allocated"]
    res["summary_lines"] = len(torch.cuda.memory_summary().splitlines())
    free, total = torch.cuda.mem_get_info()
    res["mem_get_info_total"] = total
    res["memory_fraction"] = torch.cuda.get_per_process_memory_fraction(0)
    try:
        torch.empty(int(total * 2), dtype=torch.uint8, device=d)
        res["oom"] = "no error"
    except Exception as e:  # noqa: BLE001
        res["oom_type"] = type(e).__name__
        res["oom_is_torch_oom"] = isinstance(e, torch.OutOfMemoryError)
        res["oom_text"] = str(e)[:400]
    big = torch.ones(int(total * 0.2) // 4, device=d)
    res["alloc_after_oom"] = float(big[-1].item()) == 1.0
    del big
    res["num_ooms_after"] = torch.cuda.memory_stats()["num_ooms"]
    res["ok"] = bool(res["consistent"] and res.get("oom_is_torch_oom") and res["alloc_after_oom"])
    return res


def t_hf(a):
    import torch
    from transformers import Trainer, TrainingArguments
    reset()

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 256

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, 8000, (256,), generator=g)
            return {"input_ids": ids, "labels": ids.clone()}

    model = tiny_llama()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, max_steps=20, learning_rate=1e-3,
                                 logging_steps=5, report_to="none", save_strategy="no", skip_memory_metrics=False,
                                 bf16=True, dataloader_num_workers=0, seed=0, data_seed=0)
        tr = Trainer(model=model, args=args, train_dataset=DS())
        out_ = tr.train()
    m = out_.metrics
    losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    return dict(ok=True, train_loss=m.get("train_loss"), losses=losses,
                mem={k: v for k, v in m.items() if "mem" in k})


def t_accel(a):
    import torch
    from accelerate.utils import find_executable_batch_size
    reset()
    tries = []
    lin = torch.nn.Linear(4096, 4096, device=dev(), dtype=torch.bfloat16)

    @find_executable_batch_size(starting_batch_size=4096)
    def step(batch_size):
        tries.append(batch_size)
        x = torch.randn(batch_size, 256, 4096, device=dev(), dtype=torch.bfloat16)
        y = lin(x).float().square().mean()
        y.backward()
        return batch_size

    with fraction(0.10):
        found = step()
    return dict(ok=found is not None and len(tries) > 1, batch=found, tries=tries)


def t_lightning(a):
    import torch
    import lightning as L
    from lightning.pytorch.callbacks import DeviceStatsMonitor
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.tuner import Tuner
    reset()

    class M(L.LightningModule):
        def __init__(self, batch_size=2):
            super().__init__()
            self.batch_size = batch_size
            self.net = torch.nn.Sequential(torch.nn.Linear(2048, 32768), torch.nn.GELU(), torch.nn.Linear(32768, 2048))

        def training_step(self, batch, i):
            (x,) = batch
            loss = self.net(x).square().mean()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

        def train_dataloader(self):
            return torch.utils.data.DataLoader(DATA, batch_size=self.batch_size)

    g = torch.Generator().manual_seed(0)
    DATA = torch.utils.data.TensorDataset(torch.randn(32768, 2048, generator=g))  # > any batch that fits the cap

    res = {}
    with tempfile.TemporaryDirectory() as d:
        m = M(batch_size=8)
        tr = L.Trainer(accelerator="gpu", devices=1, max_steps=6, logger=CSVLogger(d), log_every_n_steps=1,
                       callbacks=[DeviceStatsMonitor(cpu_stats=False)], enable_progress_bar=False,
                       enable_checkpointing=False, enable_model_summary=False)
        tr.fit(m)
        logged = set()
        for root, _, names in os.walk(d):
            for n in names:
                if n == "metrics.csv":
                    with open(os.path.join(root, n)) as f:
                        logged |= set(f.readline().strip().split(","))
        res["device_stats_keys"] = len([k for k in logged if "allocated_bytes" in k or "reserved_bytes" in k])
        m2 = M(batch_size=2)
        tr2 = L.Trainer(accelerator="gpu", devices=1, max_steps=3, logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, enable_model_summary=False)
        with fraction(0.06):
            res["batch_found"] = Tuner(tr2).scale_batch_size(m2, mode="power", steps_per_trial=1, init_val=2,
                                                             max_trials=14)
    res["ok"] = res["device_stats_keys"] > 0 and bool(res["batch_found"])
    return res


def t_cudnn(a):
    import torch
    import torchvision
    reset()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=100).to(dev()).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    g = torch.Generator(device=dev()).manual_seed(0)
    losses, times = [], []
    for i in range(12):
        x = torch.randn(64, 3, 224, 224, device=dev(), generator=g).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (64,), device=dev(), generator=g)
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    torch.backends.cudnn.benchmark = False
    return dict(ok=all(math.isfinite(v) for v in losses), losses=losses, step_s=statistics.median(times[4:]),
                peak_reserved=torch.cuda.max_memory_reserved())


def t_graphs(a):
    import torch
    reset()
    torch.manual_seed(0)
    d = dev()
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(d)
    ref = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(d)
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    sx = torch.randn(256, 1024, device=d)
    sy = torch.randn(256, 1024, device=d)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up on a side stream, as PyTorch's docs do
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    ref.load_state_dict(model.state_dict())
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        h = model[0](sx)  # intermediates live in the graph's private pool
        h2 = model[1](h)
        sloss = torch.nn.functional.mse_loss(model[2](h2), sy)
        sloss.backward()
        opt.step()
    gen = torch.Generator(device=d).manual_seed(1)
    diffs, losses = [], []
    noise = torch.empty(256, 1024, device=d)  # allocated while the graph lives: must not land on its memory
    for i in range(10):
        x = torch.randn(256, 1024, device=d, generator=gen)
        y = torch.randn(256, 1024, device=d, generator=gen)
        sx.copy_(x)
        sy.copy_(y)
        noise.fill_(float(i))
        g.replay()
        ropt.zero_grad(set_to_none=True)
        rl = torch.nn.functional.mse_loss(ref(x), y)
        rl.backward()
        ropt.step()
        losses.append(sloss.item())
        diffs.append(abs(sloss.item() - rl.item()))
    res = dict(losses=losses, max_diff=max(diffs), noise_intact=float(noise[0, 0].item()) == 9.0)
    res["graph_ok"] = res["max_diff"] < 1e-4 and res["noise_intact"]
    try:
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            t = torch.full((MiB,), 3.0, device=d)
        u = torch.full((MiB,), 4.0, device=d)
        res["mempool"] = "ok" if float(t.sum().item()) == 3.0 * MiB and float(u.sum().item()) == 4.0 * MiB else "bad"
        res["mempool_use_count"] = pool.use_count()
        del t, u, pool
    except Exception as e:  # noqa: BLE001
        res["mempool"] = "%s: %s" % (type(e).__name__, str(e)[:200])
    del g
    res["ok"] = res["graph_ok"] and res["mempool"] == "ok"
    return res


def t_replayfree(a):
    """A graph destroyed while its replay still runs (PyTorch's test_repeat_graph_capture_cublas_workspace_memory,
    made deterministic): the graph's temporary, freed during the capture, is written by the replay after a
    captured sleep, and the graph dies (releasePool) while the replay sleeps. Its pool's memory must stay mapped
    until the replay ends: an allocator that unmaps at releasePool makes the replay touch an unmapped address
    (illegal memory access). Twice 8 rounds: `del g` alone, and `del g` then empty_cache()."""
    import torch
    reset()
    d = dev()
    x = torch.ones(4 * MiB, device=d)  # 16 MiB of float32: the temporary below is as large
    want = 2.0 * x.numel()
    outs, rounds = [], 0
    t0 = time.time()
    for empty in (False, True):
        for _ in range(8):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                torch.cuda._sleep(200_000_000)  # ~0.1 s at the H100's clock: the replay is still sleeping at `del g`
                tmp = x * 2  # the graph's temporary: freed when the capture ends
                out = tmp.sum()
                del tmp
            g.replay()
            del g  # releasePool while the replay sleeps
            if empty:
                torch.cuda.empty_cache()
            outs.append(out)
            rounds += 1
    torch.cuda.synchronize()  # an illegal access raises here (or at .item())
    vals = [float(o.item()) for o in outs]
    res = dict(rounds=rounds, all_right=all(v == want for v in vals), wrong=[v for v in vals if v != want][:4],
               seconds=round(time.time() - t0, 2))
    del outs
    res["ok"] = res["all_right"]
    return res


def t_compile(a):
    import torch
    reset()
    torch.manual_seed(0)
    d = dev()

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).to(d)

    eager, m = make(), make()
    cm = torch.compile(m, mode="reduce-overhead")
    o1 = torch.optim.SGD(eager.parameters(), lr=0.05)
    o2 = torch.optim.SGD(m.parameters(), lr=0.05)
    gen = torch.Generator(device=d).manual_seed(0)
    le, lc = [], []
    t0 = time.perf_counter()
    for i in range(12):
        x = torch.randn(128, 512, device=d, generator=gen)
        for mod, opt, out in ((eager, o1, le), (cm, o2, lc)):
            torch.compiler.cudagraph_mark_step_begin()
            loss = mod(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            out.append(loss.item())
    diff = max(abs(x - y) for x, y in zip(le, lc))
    return dict(ok=diff < 1e-3, losses=lc, max_diff_vs_eager=diff, wall_s=time.perf_counter() - t0)


def replay_peaks(pickle_path):
    """`gmlake replay --json` on a snapshot pickle: peak live/allocated/reserved per policy."""
    gm = os.path.join(REPO, "bin", "gmlake")
    if not os.path.isfile(gm):
        return {"error": "bin/gmlake not carried"}
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "r.json")
        r = subprocess.run([gm, "replay", "--policy", "caching,expandable,gmlake", "--json", js, pickle_path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return {"error": (r.stderr or r.stdout)[-400:]}
        rows = json.load(open(js))
    return {row["policy"]: dict(peak_live=row["peak_live_bytes"], peak_reserved=row["peak_reserved_bytes"])
            for row in rows}


def trace_peak(snap):
    """Peak of live bytes (each request rounded up to 512 B) over the snapshot's trace, computed here."""
    live, peak, sizes = 0, 0, {}
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            n = (e["size"] + 511) // 512 * 512
            sizes[e["addr"]] = n
            live += n
            peak = max(peak, live)
        elif e["action"] == "free_completed" and e["addr"] in sizes:
            live -= sizes.pop(e["addr"])
    return peak


def t_snapshot(a):
    import pickle
    import torch
    reset()
    fired = []
    torch._C._cuda_attach_out_of_memory_observer(lambda *args: fired.append(args))
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    torch.manual_seed(0)
    m = tiny_llama(hidden=512, layers=4).to(dev())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev()).manual_seed(0)
    for i in range(4):
        ids = torch.randint(0, 8000, (4, 128 * (i + 1)), device=dev(), generator=gen)
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del m, opt, loss, ids
    gc.collect()
    torch.cuda.synchronize()
    res = dict(max_memory_allocated=torch.cuda.max_memory_allocated())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "snap.pickle")
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(None)
        with open(path, "rb") as f:
            snap = pickle.load(f)
        ent = snap["device_traces"][0]
        res["trace_entries"] = len(ent)
        res["actions"] = sorted(set(e["action"] for e in ent))
        res["frames_on_alloc"] = sum(1 for e in ent if e["action"] == "alloc" and e.get("frames"))
        res["segments"] = len(snap["segments"])
        res["trace_peak_live"] = trace_peak(snap)
        viz = {}
        for kind in ("trace_plot", "segment_plot"):
            out = os.path.join(d, kind + ".html")
            r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", kind, path, "-o", out],
                               capture_output=True, text=True, timeout=120)
            viz[kind] = os.path.getsize(out) if r.returncode == 0 and os.path.isfile(out) else \
                "failed: " + (r.stderr or r.stdout)[-300:]
        res["memory_viz"] = viz
        res["replay"] = replay_peaks(path)
    # an out-of-memory observer fires
    try:
        free, total = torch.cuda.mem_get_info()
        torch.empty(int(total * 2), dtype=torch.uint8, device=dev())
    except torch.OutOfMemoryError:
        pass
    res["oom_observer_calls"] = len(fired)
    rp = res["replay"].get("gmlake", {})
    res["ok"] = (all(isinstance(v, int) for v in viz.values()) and res["oom_observer_calls"] > 0 and
                 rp.get("peak_live") == res["trace_peak_live"])
    return res


def t_maxseq(a):
    import torch
    reset()
    torch.manual_seed(0)
    m = tiny_llama(hidden=2048, layers=8, vocab=32000).to(dev()).to(torch.bfloat16)
    opt = torch.optim.SGD(m.parameters(), lr=1e-5)
    budget = a.budget_gib * GiB
    total = torch.cuda.mem_get_info()[1]
    probes = []

    def fits(seq):
        try:
            ids = torch.randint(0, 32000, (2, seq), device=dev())
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, ids
            ok = True
        except torch.OutOfMemoryError:
            ok = False
        opt.zero_grad(set_to_none=True)
        gc.collect()
        probes.append("%d:%s" % (seq, "ok" if ok else "oom"))
        return ok

    with fraction(budget / total):
        lo, hi = 0, 128
        while fits(hi):  # doubling, then bisection on multiples of 128
            lo, hi = hi, hi * 2
            if hi > 65536:
                break
        while hi - lo > 128:
            mid = (lo + hi) // 2 // 128 * 128
            if fits(mid):
                lo = mid
            else:
                hi = mid
    return dict(ok=lo > 0, max_seq=lo, budget_gib=a.budget_gib, probes=" ".join(probes))


def t_pyloop(a):
    import torch
    d = dev()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # not reset(): the pluggable fallback has no peak statistics to reset
    res = {}
    for size in (512, MiB, 64 * MiB):
        for _ in range(2000):
            t = torch.empty(size, dtype=torch.uint8, device=d)
            del t
        best = None
        for rep in range(5):
            n = 20000
            t0 = time.perf_counter_ns()
            for _ in range(n):
                t = torch.empty(size, dtype=torch.uint8, device=d)
                del t
            ns = (time.perf_counter_ns() - t0) / n
            best = ns if best is None else min(best, ns)
        res["ns_%d" % size] = round(best, 1)
    res["ok"] = True
    return res


TESTS = dict(stats=t_stats, hf=t_hf, accel=t_accel, lightning=t_lightning, cudnn=t_cudnn, graphs=t_graphs,
             replayfree=t_replayfree, compile=t_compile, snapshot=t_snapshot, maxseq=t_maxseq, pyloop=t_pyloop)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--alloc", required=True, choices=("native", "expandable", "gmlake", "gmlake-pluggable"))
    p.add_argument("--tests", default=",".join(TESTS))
    p.add_argument("--out")
    p.add_argument("--budget-gib", type=float, default=16.0)
    a = p.parse_args()
    import torch
    head = dict(alloc=a.alloc, torch=torch.__version__, conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    if a.alloc.startswith("gmlake"):
        import gmlake_torch
        head["mode"] = gmlake_torch.mode()
        head["backend"] = torch.cuda.get_allocator_backend() if hasattr(torch.cuda, "get_allocator_backend") else ""
        if head["mode"] is None:
            sys.exit("ecosystem.py --alloc gmlake must run under `python3 -m gmlake_torch` (or GMLAKE=1)")
    for name in a.tests.split(","):
        t0 = time.time()
        log("start", a.alloc, name)
        try:
            res = TESTS[name](a)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res = dict(ok=False, error="%s: %s" % (type(e).__name__, str(e)[:600]))
        res.update(head, test=name, wall_s=round(time.time() - t0, 1))
        line = json.dumps(res, default=str)
        print("ECO " + line, flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(line + "\n")
        log("end", a.alloc, name, "ok" if res.get("ok") else "FAILED", res.get("error", ""))


if __name__ == "__main__":
    main()
