#!/usr/bin/env python3
"""End-to-end benchmark: the same training job under PyTorch's native allocator, expandable_segments:True and
gmlake (one process per run, so each allocator starts from a clean GPU). Run by bench/e2e/run.sh; see
docs/pytorch.md.

  python3 train.py --config ckpt --alloc gmlake --out results.jsonl          # one timed run
  torchrun --standalone --nproc_per_node 2 train.py --config fsdp --alloc gmlake --out results.jsonl
  python3 train.py --config ckpt --alloc gmlake --maxbatch --budget-gib 20 --out results.jsonl
  torchrun --standalone --nproc_per_node 1 train.py --config fsdp --alloc gmlake --profile 2 --out r.jsonl
  torchrun --standalone --nproc_per_node 2 train.py --config ddp --alloc gmlake --profile 2 --out r.jsonl

The job (as ../../../shared/tools/record_trace.py): a randomly initialised Llama-architecture model
(transformers LlamaConfig), bf16, AdamW, a random sequence length per step drawn from a fixed seed, so every
allocator sees the same sequence of requests and must produce the same losses. Configurations:
  ckpt  0.93 B params, full fine-tune with gradient checkpointing, batch 8, seq 256-2048
  lora  2.9 B params, LoRA r=16 (peft) on the attention projections, batch 4, seq 256-2048
  fsdp  0.93 B params, FSDP2 (fully_shard per decoder layer, bf16 params / fp32 reduce) on every rank of torchrun
  ddp   0.93 B params, bf16, DistributedDataParallel on every rank of torchrun (gradient all-reduce in buckets)
Allocators: native (no PYTORCH_CUDA_ALLOC_CONF), expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True),
gmlake (gmlake_torch.enable(); GMLAKE_POLICY picks the policy, default gmlake).

Each run appends one JSON object to --out and prints it after "RESULT ": peak reserved / allocated / requested
bytes (PyTorch's memory_stats for native and expandable, gmlake_torch.stats() for gmlake: PyTorch's own
statistics do not work under a plugged allocator), fragmentation = 1 - peak allocated / peak reserved and
frag_requested = 1 - peak requested / peak reserved (the same yardstick for all three), per-step times and their
median after the warm-up steps, the loss of every step, and for gmlake its driver calls.

--profile N (the FSDP2 profile of issue 16; bench/e2e/run.sh PROFILE=N) adds, per step: PyTorch's allocator
counters over the timed steps after the warm-up (device allocs/frees, sync-all-streams, retries) and for gmlake
its driver calls and their wall time by kind (GMLAKE_TIME_DRIVER=1); then N more steps, not timed, under
torch.profiler (CPU + CUDA activity: the CUDA runtime calls by name, e.g. cudaStreamWaitEvent, cudaEventRecord,
cudaStreamSynchronize, cudaEventSynchronize, with their count and CPU time) and PyTorch's memory history
(torch.cuda.memory._record_memory_history, which gmlake's C++ allocator keeps too: allocations and frees by
stream, the streams named after FSDP2's all-gather / reduce-scatter streams). The whole run's counts are divided
by the steps they cover. --profile-trace PATH also writes the profiled steps' Chrome trace (gzipped).

--maxbatch searches the largest batch that trains without out-of-memory (doubling, then bisection) inside a
memory budget: the GPU is first filled with a ballast allocation made outside every allocator (cuMemAlloc), so
that --budget-gib GiB are free, which makes the search fast and identical for all allocators. Each probe runs
--probe-steps steps with sequence lengths max, min, mid, max, ... . The search runs in a child process; if the
child dies (a crash rather than an exception), the probe in flight counts as failed and a new child continues.
"""
import argparse
import contextlib
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import traceback

from results import emit  # noqa: E402  (bench/e2e/results.py, beside this script)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

CONFIGS = {
    "ckpt": dict(hidden=2048, layers=16, batch=8, seq=(256, 2048), ckpt=True, lora=False, fsdp=False, ddp=False),
    "lora": dict(hidden=3072, layers=24, batch=4, seq=(256, 2048), ckpt=False, lora=True, fsdp=False, ddp=False),
    "fsdp": dict(hidden=2048, layers=16, batch=4, seq=(256, 2048), ckpt=False, lora=False, fsdp=True, ddp=False),
    "ddp": dict(hidden=2048, layers=16, batch=4, seq=(256, 2048), ckpt=False, lora=False, fsdp=False, ddp=True),
}
# The CUDA runtime (and, where the profiler sees them, driver) calls the FSDP2 profile reports by name.
SYNC_CALLS = ("cudaStreamWaitEvent", "cudaEventRecord", "cudaEventRecordWithFlags", "cudaStreamSynchronize",
              "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaEventQuery", "cudaStreamQuery")
ALLOCATORS = ("native", "expandable", "gmlake")
GiB = 1 << 30


def log(*a):
    print("[%s pid %d]" % (time.strftime("%H:%M:%S"), os.getpid()), *a, file=sys.stderr, flush=True)


def rank():
    return int(os.environ.get("RANK", "0"))


def local_rank():
    return int(os.environ.get("LOCAL_RANK", "0"))


def setup_allocator(alloc):
    """Must run before anything touches CUDA. Returns gmlake's mode ("cpp"/"pluggable") or None."""
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if alloc == "expandable" and "expandable_segments:True" not in conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    if alloc != "expandable" and conf:
        raise SystemExit("PYTORCH_CUDA_ALLOC_CONF=%r is set but --alloc is %s" % (conf, alloc))
    if alloc == "gmlake":
        import gmlake_torch
        return gmlake_torch.enable()
    return None


def mem_stats(alloc, device):
    """Peaks of the run so far, in the same keys for every allocator."""
    import torch
    if alloc == "gmlake":
        import gmlake_torch
        s = gmlake_torch.stats(device)
        return dict(peak_reserved=s["peak_reserved_bytes"], peak_allocated=s["peak_allocated_bytes"],
                    peak_requested=s["peak_requested_bytes"], reserved_end=s["reserved_bytes"],
                    driver_calls=s["driver_calls_total"], driver_calls_by_kind=s["driver_calls"],
                    stitches=s.get("num_stitches"), stitch_reuses=s.get("num_stitch_reuses"),
                    ooms=s.get("num_ooms"), cache_flushes=s.get("num_cache_flushes"),
                    alloc_failures=s.get("alloc_failures"), bad_frees=s.get("bad_frees"), policy=s.get("policy"))
    ms = torch.cuda.memory_stats(device)
    return dict(peak_reserved=ms["reserved_bytes.all.peak"], peak_allocated=ms["allocated_bytes.all.peak"],
                peak_requested=ms.get("requested_bytes.all.peak"), reserved_end=ms["reserved_bytes.all.current"],
                ooms=ms.get("num_ooms"), alloc_retries=ms.get("num_alloc_retries"),
                segments_peak=ms.get("segment.all.peak"))


def add_fragmentation(r):
    pr = r.get("peak_reserved") or 0
    r["frag"] = round(1 - r["peak_allocated"] / pr, 5) if pr else None
    r["frag_requested"] = round(1 - r["peak_requested"] / pr, 5) if pr and r.get("peak_requested") else None


def build_model(cfg, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    h = cfg["hidden"]
    lc = LlamaConfig(hidden_size=h, intermediate_size=int(h * 8 / 3 // 256 * 256), num_hidden_layers=cfg["layers"],
                     num_attention_heads=h // 128, num_key_value_heads=h // 128, vocab_size=32000,
                     max_position_embeddings=8192, use_cache=False)
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    # FSDP2 keeps fp32 sharded parameters and computes in bf16 (MixedPrecisionPolicy); the others train in bf16.
    torch.set_default_dtype(torch.float32 if cfg["fsdp"] else torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(lc)
    finally:
        torch.set_default_dtype(old)
    if cfg["ckpt"]:
        model.gradient_checkpointing_enable()
    if cfg["lora"]:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32,
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    if cfg["fsdp"]:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    if cfg["ddp"]:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[local_rank()])
    model.train()
    return model


def make_batch(step_seed, batch, seq_len):
    import torch
    g = torch.Generator(device="cuda")
    g.manual_seed(step_seed)
    return torch.randint(0, 32000, (batch, seq_len), device="cuda", generator=g)


def train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def run_train(a, cfg):
    import torch
    t_start = time.time()
    distributed = cfg["fsdp"] or cfg["ddp"]
    if distributed:
        import torch.distributed as dist
        torch.cuda.set_device(local_rank())
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank()))
    device = torch.cuda.current_device()
    if a.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:  # no NaN fill of every torch.empty: not what training does
            import torch.utils.deterministic
            torch.utils.deterministic.fill_uninitialized_memory = False
        except (ImportError, AttributeError):
            pass
    batch = a.batch or cfg["batch"]
    recording = contextlib.nullcontext()
    if a.trace:
        import gmlake_torch
        recording = gmlake_torch.record(a.trace)
    with recording:
        model, opt, lengths, losses, times, prof = train_loop(a, cfg, batch, distributed)
    params = sum(p.numel() for p in model.parameters())
    res = dict(kind="record" if a.trace else "train", config=a.config, alloc=a.alloc, params=params, batch=batch,
               steps=a.steps, warmup=a.warmup, seq_lengths=lengths, losses=losses,
               step_times=[round(t, 5) for t in times],
               median_step_s=round(statistics.median(times[a.warmup:]), 5),
               mean_step_s=round(statistics.mean(times[a.warmup:]), 5))
    if prof is not None:
        res["profile"] = prof
    if a.trace:
        import gzip
        opener = gzip.open if a.trace.endswith(".gz") else open
        with opener(a.trace, "rt") as f:
            kinds = [line[:1] for line in f]
        res.update(trace=a.trace, trace_allocs=kinds.count("a"), trace_frees=kinds.count("f"))
    res.update(mem_stats(a.alloc, device))
    free, total = torch.cuda.mem_get_info(device)
    res["device_used_end"] = total - free
    if distributed:
        import torch.distributed as dist
        mine = {k: res[k] for k in ("peak_reserved", "peak_allocated", "peak_requested")}
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        res["per_rank"] = every
        res["world_size"] = dist.get_world_size()
        for k in ("peak_reserved", "peak_allocated", "peak_requested"):
            if all(e[k] is not None for e in every):
                res[k] = max(e[k] for e in every)  # the rank that needs the most memory sets the GPU size
        dist.barrier()
        dist.destroy_process_group()
    add_fragmentation(res)
    res["wall_s"] = round(time.time() - t_start, 2)
    return res


def train_loop(a, cfg, batch, distributed):
    import torch
    model = build_model(cfg, a.seed)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    rng = random.Random(a.seed)
    lengths = [rng.randint(*cfg["seq"]) for _ in range(a.steps)]  # rng goes on for the profiled steps
    losses, times = [], []
    log("config %s alloc %s: %.2f B params, batch %d, %d steps, seq %s" %
        (a.config, a.alloc, params / 1e9, batch, a.steps, lengths))
    torch.cuda.synchronize()
    counters0 = None
    for step, L in enumerate(lengths):
        if a.profile and step == a.warmup:
            torch.cuda.synchronize()
            counters0 = alloc_counters(a.alloc)
        ids = make_batch(a.seed * 100003 + step * 101 + rank(), batch, L)
        t0 = time.perf_counter()
        loss = train_step(model, opt, ids)
        if distributed:
            import torch.distributed as dist
            loss = loss.detach().clone()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        lv = loss.item()  # waits for the step
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(lv)
        del loss, ids
        if rank() == 0:
            log("step %d seq %d loss %.6f %.3f s" % (step, L, lv, times[-1]))
    torch.cuda.synchronize()
    prof = None
    if a.profile:
        timed = len(lengths) - a.warmup
        prof = dict(timed_steps=timed,
                    per_step=per_step_delta(counters0, alloc_counters(a.alloc), timed) if counters0 else None)
        prof.update(profile_steps(a, model, opt, batch, rng, distributed))
    return model, opt, lengths, losses, times, prof


def alloc_counters(alloc):
    """The allocator's cumulative counters: PyTorch's memory_stats (gmlake's C++ allocator fills them too) and,
    for gmlake, its driver calls and their time by kind. Flat dict of numbers."""
    import torch
    c = {}
    try:
        ms = torch.cuda.memory_stats()
        for k in ("num_device_alloc", "num_device_free", "num_sync_all_streams", "num_alloc_retries",
                  "allocation.all.allocated", "segment.all.allocated"):
            if k in ms:
                c["torch." + k] = ms[k]
    except Exception as e:  # noqa: BLE001 - the pluggable fallback has no memory_stats
        log("memory_stats: %s" % e)
    if alloc == "gmlake":
        import gmlake_torch
        s = gmlake_torch.stats()
        for k, v in (s.get("driver_calls") or {}).items():
            c["calls." + k] = v
        for k, v in (s.get("driver_seconds") or {}).items():
            c["seconds." + k] = v
        c["seconds.total"] = s.get("driver_seconds_total", 0.0)
        c["calls.total"] = s.get("driver_calls_total", 0)
    return c


def per_step_delta(before, after, steps):
    out = {}
    for k in sorted(set(before) | set(after)):
        d = after.get(k, 0) - before.get(k, 0)
        out[k] = round(d / max(steps, 1), 9 if k.startswith("seconds.") else 3)
    return out


def stream_names(model):
    """cudaStream_t value -> name: the default stream and FSDP2's communication streams (all_gather_copy_in,
    all_gather, reduce_scatter, all_reduce) where the model is an FSDP2 module."""
    import torch
    names = {torch.cuda.default_stream().cuda_stream: "default"}
    names.setdefault(torch.cuda.current_stream().cuda_stream, "current")
    try:
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import fully_shard
        ctx = fully_shard.state(model)._comm_ctx
        for attr in ("all_gather_copy_in_stream", "all_gather_stream", "reduce_scatter_stream", "all_reduce_stream"):
            st = getattr(ctx, attr, None)
            if st is not None:
                names.setdefault(st.cuda_stream, attr[:-len("_stream")])
    except Exception as e:  # noqa: BLE001 - not an FSDP2 model, or a torch without these fields
        log("stream names: %s" % e)
    return names


def profile_steps(a, model, opt, batch, rng, distributed):
    """a.profile more steps under torch.profiler and the memory history; returns per-step counts."""
    import re
    import torch
    from torch.profiler import ProfilerActivity, profile
    lo, hi = CONFIGS[a.config]["seq"]
    lengths = [rng.randint(lo, hi) for _ in range(a.profile)]
    names = stream_names(model)
    history = True
    try:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000,
                                                 clear_history=True)
    except Exception as e:  # noqa: BLE001
        history = False
        log("memory history unavailable: %s" % e)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, L in enumerate(lengths):
            ids = make_batch(a.seed * 100003 + (a.steps + i) * 101 + rank(), batch, L)
            loss = train_step(model, opt, ids)
            if distributed:
                import torch.distributed as dist
                loss = loss.detach().clone()
                dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            loss.item()
            del loss, ids
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    n = max(a.profile, 1)
    out = dict(profiled_steps=a.profile, profiled_seq_lengths=lengths, profiled_step_s=round(wall / n, 5))
    if history:
        try:
            snap = torch.cuda.memory._snapshot()
            traces = snap.get("device_traces") or []
            entries = traces[torch.cuda.current_device()] if len(traces) > torch.cuda.current_device() else []
            by = {}
            for e in entries:
                sname = names.get(e.get("stream"), "stream:%#x" % (e.get("stream") or 0))
                d = by.setdefault(sname, {})
                act = e.get("action", "?")
                d[act] = d.get(act, 0) + 1
                if act == "alloc":
                    d["alloc_bytes"] = d.get("alloc_bytes", 0) + int(e.get("size", 0))
            out["by_stream"] = {s: {k: round(v / n, 1) for k, v in d.items()} for s, d in sorted(by.items())}
            out["history_entries"] = len(entries)
        except Exception as e:  # noqa: BLE001
            out["by_stream_error"] = "%s: %s" % (type(e).__name__, e)
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    calls, kernels_us = {}, 0.0
    for e in prof.key_averages():
        if re.match(r"^cu(da)?[A-Z]", e.key) and e.device_type == torch.autograd.DeviceType.CPU:
            calls[e.key] = dict(count=round(e.count / n, 1), us=round(e.cpu_time_total / n, 1))
        kernels_us += getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0) or 0
    out["runtime_calls"] = dict(sorted(calls.items(), key=lambda kv: -kv[1]["us"]))
    out["sync"] = {k: calls.get(k, {}).get("count", 0) for k in SYNC_CALLS}
    out["gpu_busy_us"] = round(kernels_us / n, 1)  # summed over streams: overlap counts twice
    if a.profile_trace and rank() == 0:
        import gzip
        import shutil
        raw = a.profile_trace[:-3] if a.profile_trace.endswith(".gz") else a.profile_trace + ".raw"
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f, gzip.open(a.profile_trace if a.profile_trace.endswith(".gz") else
                                             a.profile_trace + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(raw)
    return out


def is_oom(e):
    import torch
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(e, oom) or (isinstance(e, RuntimeError) and "out of memory" in str(e).lower())


def add_ballast(budget):
    """Leaves only `budget` bytes of the GPU free, with an allocation that no allocator sees (cuMemAlloc)."""
    import ctypes
    import torch
    torch.cuda.synchronize()  # the runtime has made the primary context current on this thread
    free, total = torch.cuda.mem_get_info()
    need = free - budget
    if need <= 0:
        return 0
    cuda = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64(0)
    r = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(need))
    if r != 0:
        raise RuntimeError("ballast cuMemAlloc_v2(%d bytes) failed: CUresult %d" % (need, r))
    return need


def run_maxbatch_child(a, cfg):
    """The search itself; prints PROBE lines the parent reads. Bounds: lo trains, hi does not (0: unknown)."""
    import torch
    torch.cuda.init()
    device = torch.cuda.current_device()
    ballast = add_ballast(int(a.budget_gib * GiB))
    free, total = torch.cuda.mem_get_info()
    print("BALLAST %d free %d" % (ballast, free), flush=True)
    model = build_model(cfg, a.seed)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    lo_seq, hi_seq = cfg["seq"]
    pattern = [hi_seq, lo_seq, (lo_seq + hi_seq) // 2, hi_seq, lo_seq + (hi_seq - lo_seq) // 4, hi_seq]

    def probe(b):
        try:
            for i in range(a.probe_steps):
                ids = make_batch(a.seed + i, b, pattern[i % len(pattern)])
                loss = train_step(model, opt, ids)
                loss.item()
                del loss, ids
            torch.cuda.synchronize()
            return True
        except Exception as e:  # noqa: BLE001
            if not is_oom(e):
                raise
            return False

    def clean():
        opt.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    # one step at batch 1 creates the optimizer state, so that every probe starts from the same steady state
    print("PROBE-START 1", flush=True)
    ok = probe(1)
    clean()
    print("PROBE 1 %s" % ("ok" if ok else "oom"), flush=True)
    if not ok:
        return
    lo, hi = max(a.lo, 1), a.hi
    while hi == 0 or hi - lo > 1:
        b = lo * 2 if hi == 0 else (lo + hi) // 2
        if b > a.max_batch:
            break
        print("PROBE-START %d" % b, flush=True)
        t0 = time.time()
        ok = probe(b)
        clean()
        print("PROBE %d %s %.1f" % (b, "ok" if ok else "oom", time.time() - t0), flush=True)
        if ok:
            lo = b
        else:
            hi = b
    st = mem_stats(a.alloc, device)
    print("STATS " + json.dumps(st), flush=True)


def run_maxbatch(a, cfg):
    """Parent of the search: restarts the child after a crash with the bounds learnt so far."""
    lo, hi, probes, restarts, stats, ballast = 1, 0, [], 0, None, None
    t_start = time.time()
    while True:
        cmd = [sys.executable, os.path.abspath(__file__), "--config", a.config, "--alloc", a.alloc,
               "--maxbatch-child", "--lo", str(lo), "--hi", str(hi), "--budget-gib", str(a.budget_gib),
               "--probe-steps", str(a.probe_steps), "--seed", str(a.seed), "--max-batch", str(a.max_batch)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        inflight = None
        for line in p.stdout:
            line = line.strip()
            log("maxbatch %s/%s: %s" % (a.config, a.alloc, line[:300]))
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "PROBE-START":
                inflight = int(parts[1])
            elif parts[0] == "PROBE":
                b, ok = int(parts[1]), parts[2] == "ok"
                probes.append([b, "ok" if ok else "oom"])
                inflight = None
                if ok:
                    lo = max(lo, b)
                elif hi == 0 or b < hi:
                    hi = b
            elif parts[0] == "STATS":
                stats = json.loads(line[6:])
            elif parts[0] == "BALLAST":
                ballast = int(parts[1])
        rc = p.wait()
        if rc == 0 and stats is not None:
            break
        if inflight is not None:
            probes.append([inflight, "crash"])
            if hi == 0 or inflight < hi:
                hi = inflight
        restarts += 1
        if restarts > 3 or (hi != 0 and hi - lo <= 1) or inflight is None:
            break
    res = dict(kind="maxbatch", config=a.config, alloc=a.alloc, max_batch=lo if any(x[1] == "ok" for x in probes) else 0,
               first_failing_batch=hi, budget_gib=a.budget_gib, ballast_bytes=ballast, probe_steps=a.probe_steps,
               probes=probes, restarts=restarts, complete=stats is not None, wall_s=round(time.time() - t_start, 1))
    if stats:
        res.update({"search_" + k: v for k, v in stats.items() if k.startswith("peak_")})
    if not probes:
        raise RuntimeError("the search child failed before its first probe (see the log above)")
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=sorted(CONFIGS), required=True)
    p.add_argument("--alloc", choices=ALLOCATORS, required=True)
    p.add_argument("--out", help="append the result as one JSON line to this file")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=0, help="override the configuration's batch size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-deterministic", dest="deterministic", action="store_false",
                   help="skip torch.use_deterministic_algorithms (losses may then differ in the last digits)")
    p.add_argument("--trace", help="gmlake only: record the run's allocation trace here (gmlake_torch.record)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="count allocator, driver and CUDA runtime calls per step, then profile N more steps")
    p.add_argument("--profile-trace", help="with --profile: write the profiled steps' Chrome trace here (.gz)")
    p.add_argument("--maxbatch", action="store_true", help="search the largest batch instead of a timed run")
    p.add_argument("--budget-gib", type=float, default=20.0, help="--maxbatch: GiB left free for the job")
    p.add_argument("--probe-steps", type=int, default=4)
    p.add_argument("--max-batch", type=int, default=1024)
    p.add_argument("--maxbatch-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--lo", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--hi", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    cfg = CONFIGS[a.config]
    if a.trace and a.alloc != "gmlake":
        raise SystemExit("--trace needs --alloc gmlake")
    if a.profile < 0 or (a.profile and a.steps <= a.warmup):
        raise SystemExit("--profile %d: want N >= 0 and --steps (%d) above --warmup (%d)" % (a.profile, a.steps, a.warmup))
    if (a.maxbatch or a.maxbatch_child) and (cfg["fsdp"] or cfg["ddp"]):
        raise SystemExit("--maxbatch runs single-GPU configurations only")
    # torch.use_deterministic_algorithms needs this before the first cuBLAS call (same for every allocator)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    t0 = time.time()
    try:
        if a.maxbatch:  # the parent touches no GPU
            res = run_maxbatch(a, cfg)
        else:
            gm_mode = setup_allocator(a.alloc)
            if a.maxbatch_child:
                return run_maxbatch_child(a, cfg)
            res = run_train(a, cfg)
            res["gmlake_mode"] = gm_mode
        res["ok"] = True
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report every failure as a result line
        if a.maxbatch_child:
            raise
        traceback.print_exc()
        kind = "maxbatch" if a.maxbatch else "record" if a.trace else "train"
        res = dict(kind=kind, config=a.config, alloc=a.alloc, ok=False,
                   error="%s: %s" % (type(e).__name__, str(e)[:2000]), wall_s=round(time.time() - t0, 1))
    try:
        import torch
        res["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        pass
    if a.alloc == "gmlake":
        res.setdefault("policy", os.environ.get("GMLAKE_POLICY") or "gmlake")
    if rank() == 0:
        emit("RESULT", res, a.out)
    return 0 if res.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
