"""gmlake_torch: train PyTorch models on the gmlake allocator, with no PyTorch rebuild.

    import gmlake_torch
    gmlake_torch.enable()            # before anything touches CUDA
    import torch
    ... train ...
    print(gmlake_torch.stats())      # peak reserved, fragmentation, driver calls, ...

enable() loads libgmlake.so (built by `make capi`) and makes it PyTorch's CUDA allocator through
torch.cuda.memory's pluggable-allocator interface: allocations and frees go to gmlake_alloc / gmlake_free;
torch.cuda.empty_cache(), Tensor.record_stream() and torch.cuda.set_per_process_memory_fraction() reach the
library through the allocator's hooks. An allocation the library cannot serve raises torch.OutOfMemoryError
(through a ten-line C++ shim compiled against the installed torch headers on first use and cached), or, if no
compiler is there, a RuntimeError whose text starts with "CUDA out of memory".

PyTorch's own memory statistics (torch.cuda.memory_allocated, max_memory_reserved, memory_stats) raise under a
plugged allocator: use stats() instead. record(path) writes the allocation trace of the code it wraps in the
project's text format (`a ID SIZE STREAM` / `f ID` lines), which `gmlake replay` reads.

Configuration (environment variables read by the library when a device's engine starts, see capi/gmlake.h):
GMLAKE_POLICY (gmlake | caching | expandable | gmlake-paper), GMLAKE_MEMORY_FRACTION, GMLAKE_MEMORY_LIMIT,
GMLAKE_TRACE, GMLAKE_VERBOSE, and one GMLAKE_<KNOB> per engine knob (knobs()). enable(policy=..., **knobs) sets
them for you. The library is found at lib_path, else $GMLAKE_LIB, else capi/libgmlake.so of this repository.

Only the parts that need PyTorch import it: stats(), record(), knobs() and the raw calls work without torch
(the project's tests drive the library on its simulated device that way, with GMLAKE_DEVICE=sim).
"""

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings

__all__ = ["enable", "enabled", "mode", "stats", "record", "empty_cache", "set_memory_fraction", "knobs",
           "last_error", "find_library", "load", "GMLakeError"]

_lock = threading.Lock()
_lib = None          # ctypes.CDLL of libgmlake.so
_lib_path = None
_shim = None         # ctypes.CDLL of the OOM shim, if built
_allocator = None    # the torch allocator object, kept alive
_mode = None         # None until enable(); then "shim" (torch.OutOfMemoryError) or "throw" (RuntimeError)


class GMLakeError(RuntimeError):
    """An error reported by libgmlake (its text comes from gmlake_last_error)."""


def find_library(lib_path=None):
    """Returns the path of libgmlake.so: lib_path, $GMLAKE_LIB, or capi/libgmlake.so in this repository."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [lib_path, os.environ.get("GMLAKE_LIB"),
                  os.path.join(here, "..", "..", "capi", "libgmlake.so"),
                  os.path.join(here, "libgmlake.so")]
    for c in candidates:
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    tried = [c for c in candidates if c]
    raise FileNotFoundError("libgmlake.so not found (tried %s): build it with `make capi` in the gmlake "
                            "repository, or pass lib_path= / set GMLAKE_LIB" % ", ".join(tried))


def load(lib_path=None):
    """Loads libgmlake.so (once) and returns the ctypes handle. Does not touch PyTorch or CUDA."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            if lib_path and os.path.abspath(lib_path) != _lib_path:
                raise GMLakeError("libgmlake is already loaded from %s; cannot load %s too" % (_lib_path, lib_path))
            return _lib
        path = find_library(lib_path)
        lib = ctypes.CDLL(path)
        vp, sz, i, d, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_double, ctypes.c_char_p
        sigs = {
            "gmlake_alloc": (vp, [sz, i, vp]), "gmlake_free": (None, [vp, sz, i, vp]),
            "gmlake_init": (None, [i]), "gmlake_empty_cache": (None, []),
            "gmlake_set_memory_fraction": (None, [d, i]), "gmlake_record_stream": (None, [vp, vp]),
            "gmlake_stats_json": (i, [i, cp, sz]), "gmlake_last_error": (i, [cp, sz]),
            "gmlake_knobs": (i, [cp, sz]), "gmlake_trace_start": (i, [cp]), "gmlake_trace_stop": (i, []),
            "gmlake_close": (i, [i]),
        }
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _lib, _lib_path = lib, path
        return lib


def _text(fn, *args):
    """Calls an snprintf-style library function and returns its text."""
    n = 4096
    while True:
        buf = ctypes.create_string_buffer(n)
        need = fn(*args, buf, n)
        if need < 0:
            raise GMLakeError(last_error() or "libgmlake call failed")
        if need < n:
            return buf.value.decode("utf-8", "replace")
        n = need + 1


def last_error():
    """The calling thread's (or else the process's) last error text of the library, "" if none."""
    lib = load()
    buf = ctypes.create_string_buffer(4096)
    lib.gmlake_last_error(buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def knobs():
    """The engine knobs settable by environment variable GMLAKE_<NAME>, e.g. ["CHUNK_SIZE", ...]."""
    t = _text(load().gmlake_knobs)
    return t.split(",") if t else []


def _current_device():
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


def stats(device=None):
    """Statistics of the gmlake engine of device (default: the current CUDA device) as a dict: requested,
    allocated and reserved bytes with their peaks, fragmentation (1 - peak_allocated / peak_reserved) and
    fragmentation_requested (against peak requested bytes), counters, driver_calls by kind. A device whose
    engine has not started yet gives {"device": N, "initialized": False}."""
    d = _current_device() if device is None else int(device)
    return json.loads(_text(load().gmlake_stats_json, d))


def empty_cache():
    """Returns every cached (free) byte of every device to CUDA (torch.cuda.empty_cache() does the same once
    enable() has run)."""
    load().gmlake_empty_cache()


def set_memory_fraction(fraction, device=None):
    """Caps the physical memory the engine of device may hold at fraction of the device's memory; an
    allocation beyond it fails as on a smaller GPU (after gmlake released its cache and tried stitching)."""
    d = _current_device() if device is None else int(device)
    lib = load()
    lib.gmlake_set_memory_fraction(float(fraction), d)


@contextlib.contextmanager
def record(path):
    """Records the allocation trace of the wrapped code into path (gzipped if it ends in .gz), in the text
    format `gmlake replay` reads. Allocations made before entering are not traced; frees of them are skipped."""
    lib = load()
    if lib.gmlake_trace_start(os.fsencode(path)) != 0:
        raise GMLakeError(last_error())
    try:
        yield path
    finally:
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.synchronize()
        except Exception:
            pass
        if lib.gmlake_trace_stop() != 0:
            raise GMLakeError(last_error())


def enabled():
    """True once enable() has installed gmlake as PyTorch's CUDA allocator."""
    return _mode is not None


def mode():
    """How out-of-memory surfaces: "shim" (torch.OutOfMemoryError), "throw" (RuntimeError), None (not enabled)."""
    return _mode


_SHIM_SRC = r"""
// gmlake OOM shim: forwards to libgmlake's gmlake_alloc and turns a NULL block of nonzero size into
// c10::OutOfMemoryError, which PyTorch raises in Python as torch.OutOfMemoryError.
#include <c10/util/Exception.h>
#include <cstddef>
typedef void* (*gm_alloc_t)(size_t, int, void*);
typedef int (*gm_err_t)(char*, size_t);
static gm_alloc_t gm_alloc = nullptr;
static gm_err_t gm_err = nullptr;
extern "C" void gmlake_torch_shim_set(void* a, void* e) {
  gm_alloc = reinterpret_cast<gm_alloc_t>(a);
  gm_err = reinterpret_cast<gm_err_t>(e);
}
extern "C" void* gmlake_torch_alloc(size_t size, int device, void* stream) {
  void* p = gm_alloc(size, device, stream);
  if (p == nullptr && size != 0) {
    char buf[2048];
    buf[0] = 0;
    gm_err(buf, sizeof buf);
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (gmlake). Tried to allocate ", size,
                     " bytes on device ", device, ". ", buf);
  }
  return p;
}
"""


def _build_shim(torch, verbose=False):
    """Compiles the OOM shim against the installed torch headers (cached by source, torch version and ABI)
    and returns its path. Raises on any failure."""
    from torch.utils import cpp_extension
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    key = hashlib.sha256(("%s|%s|%d|%s" % (_SHIM_SRC, torch.__version__, abi, sys.version)).encode()).hexdigest()[:16]
    cache = os.environ.get("GMLAKE_SHIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gmlake_torch")
    out = os.path.join(cache, "gmlake_shim_%s.so" % key)
    if os.path.isfile(out):
        return out
    os.makedirs(cache, exist_ok=True)
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise RuntimeError("no C++ compiler (g++) found")
    try:
        incs = cpp_extension.include_paths()
    except TypeError:
        incs = cpp_extension.include_paths(False)
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "shim.cc")
        with open(src, "w") as f:
            f.write(_SHIM_SRC)
        tmp_out = "%s.%d.tmp" % (out, os.getpid())  # in the cache folder, so that the rename is atomic
        errors = []
        for std in ("c++20", "c++17"):  # newer torch headers need C++20; older compilers may lack it
            cmd = [cxx, "-O2", "-std=" + std, "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi]
            cmd += ["-I" + p for p in incs]
            cmd += [src, "-o", tmp_out, "-L" + torch_lib, "-lc10", "-Wl,-rpath," + torch_lib]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0:
                break
            errors.append("%s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
        else:
            raise RuntimeError("compiling the OOM shim failed:\n" + "\n".join(errors))
        os.replace(tmp_out, out)  # several processes (torchrun ranks) may build at once: last one wins
    if verbose:
        print("gmlake_torch: built OOM shim %s" % out, file=sys.stderr)
    return out


class _Allocator:
    """What torch.cuda.memory.change_current_allocator takes: an object whose allocator() is the C++ one."""

    def __init__(self, raw):
        self._allocator = raw

    def allocator(self):
        return self._allocator


def _addr(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def enable(lib_path=None, policy=None, shim=None, verbose=None, **knob_values):
    """Makes gmlake PyTorch's CUDA allocator. Must run before CUDA is initialised (before the first CUDA
    tensor, torch.cuda.init(), or anything else that touches the GPU); raises RuntimeError otherwise.

    policy: gmlake (default), caching, expandable or gmlake-paper (sets GMLAKE_POLICY).
    shim: build the OOM shim so that out-of-memory raises torch.OutOfMemoryError. Default: no (GMLAKE_SHIM=1
      turns it on): under torch 2.11 on an H200 the shim's c10::OutOfMemoryError crashed the process
      (segfault, docs/results/README.md), so by default out-of-memory raises
      RuntimeError("CUDA out of memory (gmlake): ...") from the library's own C++ throw, which works.
    knob_values: engine knobs, e.g. chunk_size="64MiB" (sets GMLAKE_CHUNK_SIZE); see knobs().
    Returns the mode: "shim" or "throw". Calling it again returns the mode and changes nothing."""
    global _shim, _allocator, _mode
    import torch
    if _mode is not None:
        return _mode
    if torch.cuda.is_initialized():
        raise RuntimeError("gmlake_torch.enable() must run before CUDA is initialised: call it at the top of "
                           "the program, before any CUDA tensor, torch.cuda.init() or model.cuda()")
    if policy is not None:
        os.environ["GMLAKE_POLICY"] = str(policy)
    if verbose is not None:
        os.environ["GMLAKE_VERBOSE"] = "1" if verbose else ""
    verbose = bool(os.environ.get("GMLAKE_VERBOSE"))
    lib = load(lib_path)
    names = set(knobs())
    for k, v in knob_values.items():
        name = k.upper()
        if name not in names:
            raise ValueError("unknown gmlake knob %r: known knobs are %s" % (k, sorted(n.lower() for n in names)))
        os.environ["GMLAKE_" + name] = str(v)

    if shim is None:
        shim = os.environ.get("GMLAKE_SHIM", "0") not in ("0", "", "false", "no")
    alloc_addr, how = _addr(lib, "gmlake_alloc_throw"), "throw"
    if shim:
        try:
            s = ctypes.CDLL(_build_shim(torch, verbose))
            s.gmlake_torch_shim_set.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            s.gmlake_torch_shim_set(_addr(lib, "gmlake_alloc"), _addr(lib, "gmlake_last_error"))
            _shim, alloc_addr, how = s, _addr(s, "gmlake_torch_alloc"), "shim"
        except Exception as e:  # no compiler, no headers: fall back to the library's own C++ throw
            warnings.warn("gmlake_torch: OOM shim not built (%s); out-of-memory will raise RuntimeError "
                          "instead of torch.OutOfMemoryError" % str(e).splitlines()[0])
    raw = torch._C._cuda_customAllocator(alloc_addr, _addr(lib, "gmlake_free"))
    hooks = {"set_init_fn": "gmlake_init", "set_reset_fn": "gmlake_empty_cache",
             "set_memory_fraction_fn": "gmlake_set_memory_fraction", "set_record_stream_fn": "gmlake_record_stream"}
    missing = []
    for setter, fn in hooks.items():
        if hasattr(raw, setter):
            getattr(raw, setter)(_addr(lib, fn))
        else:
            missing.append(setter)
    if missing:
        warnings.warn("gmlake_torch: this torch lacks %s; those hooks are not wired" % ", ".join(missing))
    allocator = _Allocator(raw)
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise RuntimeError("gmlake_torch.enable(): PyTorch refused to swap its allocator (%s); call enable() "
                           "before anything touches CUDA" % e) from e
    _allocator, _mode = allocator, how
    if verbose:
        print("gmlake_torch: enabled (%s, library %s, policy %s)" %
              (how, _lib_path, os.environ.get("GMLAKE_POLICY") or "gmlake"), file=sys.stderr)
    return how


# Raw calls, for tests and microbenchmarks (no PyTorch involved).

def _raw_alloc(size, device=0, stream=0):
    """gmlake_alloc through ctypes: returns the address, or raises GMLakeError with the library's text."""
    p = load().gmlake_alloc(size, device, stream or None)
    if not p and size:
        raise GMLakeError(last_error())
    return p or 0


def _raw_free(ptr, device=0):
    load().gmlake_free(ptr or None, 0, device, None)


def _close(device=0):
    """gmlake_close: releases the engine of device; returns how many allocations were still live."""
    n = load().gmlake_close(device)
    if n < 0:
        raise GMLakeError(last_error())
    return n
