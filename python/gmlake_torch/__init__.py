"""gmlake_torch: the gmlake GPU allocator as PyTorch's CUDA allocator, with no change to the training script.

    pip install gmlake_torch-*.whl            # (make wheel) bundles libgmlake.so; no Go needed
    python -m gmlake_torch train.py ARGS      # or: torchrun ... -m gmlake_torch train.py ARGS
    GMLAKE=1 accelerate launch train.py       # any launcher: enabled when the process imports torch

or, in code, before anything touches CUDA:

    import gmlake_torch; gmlake_torch.enable()

enable() makes gmlake PyTorch's allocator in one of two modes (mode() says which):
  "cpp"       a C++ c10::cuda::CUDACachingAllocator::CUDAAllocator (csrc/gmlake_allocator.cc) compiled against
              the installed torch on first use and cached: every torch.cuda memory API works with PyTorch's
              meaning (memory_stats and friends, memory_snapshot, _record_memory_history, CUDA graphs and
              private pools, torch.compile(mode="reduce-overhead"), cudnn.benchmark, out-of-memory observers),
              and out of memory raises torch.OutOfMemoryError worded as PyTorch's.
  "pluggable" the fallback where no C++ compiler or torch headers exist: torch.cuda.memory's
              CUDAPluggableAllocator around gmlake_alloc_throw / gmlake_free. PyTorch's memory statistics,
              snapshots and CUDA graph pools do not work there, and out of memory is a RuntimeError (only out
              of memory says "CUDA out of memory"; other failures say what they are, GMLAKE_ERR_* named).
GMLAKE_MODE=auto (default: cpp, else pluggable with a warning) | cpp | pluggable chooses.

gmlake's own figures (stitches, driver calls by kind, fragmentation) are in stats(); record(path) writes the
allocation trace that `gmlake replay` reads. Configuration is read from the environment (GMLAKE_POLICY,
GMLAKE_MEMORY_FRACTION, GMLAKE_MEMORY_LIMIT, GMLAKE_TRACE, GMLAKE_VERBOSE, GMLAKE_<KNOB>; settings() is the
table, docs/pytorch.md says each) and checked by enable(), `python -m gmlake_torch` and GMLAKE=1's hook with
the library's own parser (check_config): a bad value is a ConfigError (GMLakeConfigError) whose one line names
the variable. The library is lib_path, else
$GMLAKE_LIB, else the libgmlake.so bundled in the package, else capi/libgmlake.so of the source tree.

stats(), record(), knobs() and the raw calls need no torch (the tests drive the library on its simulated
device that way, with GMLAKE_DEVICE=sim).
"""


import contextlib
import ctypes
import json
import os
import re
import sys
import threading
import warnings

__all__ = ["enable", "enabled", "mode", "stats", "snapshot", "record", "empty_cache", "set_memory_fraction",
           "knobs", "last_error", "find_library", "load", "check_config", "GMLakeError", "GMLakeConfigError",
           "GMLakeArgumentError", "GMLakeOutOfMemoryError"]

_lock = threading.Lock()
_lib = None          # ctypes.CDLL of libgmlake.so
_lib_path = None
_ext = None          # ctypes.CDLL of the C++ allocator ("cpp" mode)
_allocator = None    # the torch pluggable allocator object, kept alive ("pluggable" mode)
_mode = None         # None until enable(); then "cpp" or "pluggable"


class GMLakeError(RuntimeError):
    """An error reported by libgmlake (its text comes from gmlake_last_error)."""


class GMLakeConfigError(ValueError):
    """A bad gmlake setting (an environment variable or an enable() argument); the text names it."""


ConfigError = GMLakeConfigError  # the short name: gmlake_torch.ConfigError
__all__ += ["ConfigError", "settings"]


class GMLakeArgumentError(GMLakeError, ValueError):
    """A bad argument to a library call (a device out of range, an unknown pointer or pool, a fraction outside
    [0, 1], ...): gmlake_last_error_kind() == GMLAKE_ERR_INVALID."""


class GMLakeOutOfMemoryError(GMLakeError):
    """An allocation the memory cannot serve (GMLAKE_ERR_OOM), and only that: a missing driver, a bad setting or
    a disabled engine is another error. Once torch is imported, the raised class is also a
    torch.OutOfMemoryError (see _oom_class)."""


# gmlake.h's GMLAKE_ERR_* kinds.
_ERR_OOM, _ERR_INVALID, _ERR_CONFIG = 1, 2, 4
_oom_classes = {}


def _oom_class():
    """GMLakeOutOfMemoryError, also a torch.OutOfMemoryError when torch is loaded (what batch-size finders catch)."""
    torch = sys.modules.get("torch")
    base = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if not (isinstance(base, type) and issubclass(base, BaseException)):
        return GMLakeOutOfMemoryError
    if base not in _oom_classes:
        _oom_classes[base] = type("GMLakeOutOfMemoryError", (GMLakeOutOfMemoryError, base), {})
    return _oom_classes[base]


def _error(default="libgmlake call failed"):
    """The exception for the calling thread's last library error, of the class its kind says (read right after
    the failed call: the next call clears it)."""
    lib = load()
    kind = lib.gmlake_last_error_kind()
    msg = last_error() or default
    if kind == _ERR_OOM:
        return _oom_class()(msg)
    if kind == _ERR_CONFIG:
        return GMLakeConfigError(msg)
    if kind == _ERR_INVALID:
        return GMLakeArgumentError(msg)
    return GMLakeError(msg)


def find_library(lib_path=None):
    """Returns the path of libgmlake.so: lib_path, $GMLAKE_LIB, the one bundled in the package (wheel), or
    capi/libgmlake.so of the source tree. A lib_path or GMLAKE_LIB that names no file is an error."""
    here = os.path.dirname(os.path.abspath(__file__))
    if lib_path:
        if not os.path.isfile(lib_path):
            raise GMLakeConfigError("gmlake_torch: lib_path=%r is not a file" % lib_path)
        return os.path.abspath(lib_path)
    env = os.environ.get("GMLAKE_LIB")
    if env:
        if not os.path.isfile(env):
            raise GMLakeConfigError("gmlake_torch: GMLAKE_LIB=%r is not a file (unset it to use the library "
                                    "bundled with the package)" % env)
        return os.path.abspath(env)
    candidates = [os.path.join(here, "libgmlake.so"), os.path.join(here, "..", "..", "capi", "libgmlake.so")]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.abspath(c)
    raise FileNotFoundError("libgmlake.so not found (tried %s): install the gmlake_torch wheel (make wheel), "
                            "build it with `make capi`, or set GMLAKE_LIB" % ", ".join(candidates))


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
            "gmlake_init": (None, [i]),
            "gmlake_set_memory_fraction": (i, [d, i]), "gmlake_record_stream": (i, [vp, vp]),
            "gmlake_empty_cache": (i, []), "gmlake_start": (i, [i]), "gmlake_last_error_kind": (i, []),
            "gmlake_stats_json": (i, [i, cp, sz]), "gmlake_last_error": (i, [cp, sz]),
            "gmlake_knobs": (i, [cp, sz]), "gmlake_trace_start": (i, [cp]), "gmlake_trace_stop": (i, []),
            "gmlake_close": (i, [i]), "gmlake_snapshot_json": (i, [i, cp, sz]),
            "gmlake_alloc_pool": (vp, [sz, i, vp, ctypes.c_uint64, ctypes.c_uint64]),
            "gmlake_pool_create_or_incref": (i, [i, ctypes.c_uint64, ctypes.c_uint64]),
            "gmlake_pool_release": (i, [i, ctypes.c_uint64, ctypes.c_uint64]),
            "gmlake_pool_use_count": (i, [i, ctypes.c_uint64, ctypes.c_uint64]),
            "gmlake_pool_live": (i, [i, ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), sz]),
            "gmlake_get_device_stats": (i, [i, vp]), "gmlake_reset_peak_stats": (i, [i]),
            "gmlake_reset_accumulated_stats": (i, [i]), "gmlake_last_failure": (i, [vp]),
            "gmlake_cache_info": (i, [i, ctypes.POINTER(sz)]),
            "gmlake_base_allocation": (i, [vp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
            "gmlake_get_memory_fraction": (d, [i]),
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
            raise _error()
        if need < n:
            return buf.value.decode("utf-8", "replace")
        n = need + 1


def last_error():
    """The calling thread's last error text of the library: why its last library call failed, "" if that call
    succeeded (every call sets or clears it)."""
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
    allocation beyond it fails as on a smaller GPU (after gmlake released its cache and tried stitching).
    As torch.cuda.set_per_process_memory_fraction: fraction must be a real number (TypeError otherwise) in
    [0, 1] (ValueError otherwise: negative, above 1, NaN; 0 is a cap of 0 bytes, under which every allocation
    that needs new memory fails, as under PyTorch's allocator), and the device must
    exist (ValueError for an index out of range, GMLakeError if the library cannot open it). Starts the
    device's engine if it has not started."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError("gmlake_torch.set_memory_fraction: fraction must be a float, not %s" % type(fraction).__name__)
    fraction = float(fraction)
    if not (0 <= fraction <= 1):
        raise ValueError("gmlake_torch.set_memory_fraction: invalid fraction %r: allowed range [0, 1] "
                         "(0: no new memory; 1: no cap)" % fraction)
    d = _current_device() if device is None else _device_index(device)
    torch = sys.modules.get("torch")
    try:
        count = torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else None
    except Exception:
        count = None
    if d < 0 or (count is not None and d >= count):
        raise ValueError("gmlake_torch.set_memory_fraction: device %d does not exist (%s)" %
                         (d, "%d CUDA devices" % count if count is not None else "want an index >= 0"))
    if load().gmlake_set_memory_fraction(fraction, d) != 0:
        raise _error()  # GMLakeArgumentError (a ValueError) for what the library refuses as an argument


def _device_index(device):
    """A device given as an int, a "cuda:N" string or a torch.device, as its index."""
    if isinstance(device, bool):
        raise TypeError("gmlake_torch: device must be an int, a 'cuda:N' string or a torch.device")
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is not None:
        return int(index)
    if isinstance(device, str) and re.fullmatch(r"cuda(:\d+)?", device):
        return int(device.split(":")[1]) if ":" in device else _current_device()
    raise TypeError("gmlake_torch: device %r is not an int, a 'cuda:N' string or a torch.device" % (device,))


@contextlib.contextmanager
def record(path):
    """Records the allocation trace of the wrapped code into path (gzipped if it ends in .gz), in the text
    format `gmlake replay` reads. Allocations made before entering are not traced; frees of them are skipped."""
    lib = load()
    if lib.gmlake_trace_start(os.fsencode(path)) != 0:
        raise _error()
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
            raise _error()


def snapshot(device=None):
    """gmlake's own view of device's memory (gmlake_snapshot_json): segments with their blocks, and the stitched
    blocks with the chunks they view. torch.cuda.memory_snapshot() gives PyTorch's view of the same (cpp mode)."""
    d = _current_device() if device is None else int(device)
    return json.loads(_text(load().gmlake_snapshot_json, d))


def enabled():
    """True once enable() has made gmlake PyTorch's CUDA allocator."""
    return _mode is not None


def mode():
    """Which way gmlake is PyTorch's allocator: "cpp" (the full C++ CUDAAllocator), "pluggable" (the fallback:
    no PyTorch memory statistics, snapshots or graph pools; out of memory is a RuntimeError), None (not enabled)."""
    return _mode


def _settings_lib():
    """The library, for the settings check: loaded, and new enough to have it. Either failure is one clear
    ConfigError (there is no second parser to fall back to)."""
    try:
        lib = load()
    except GMLakeConfigError:
        raise
    except (OSError, GMLakeError) as e:
        raise GMLakeConfigError("gmlake_torch: cannot check the gmlake settings: libgmlake.so cannot be loaded "
                                "(%s): reinstall the wheel, or set GMLAKE_LIB to a libgmlake.so built by `make "
                                "capi`" % str(e).splitlines()[0]) from None
    if not hasattr(lib, "gmlake_check_settings") or not hasattr(lib, "gmlake_settings_json"):
        raise GMLakeConfigError("gmlake_torch: %s is older than this gmlake_torch (it has no gmlake_check_settings): "
                                "rebuild it (make capi), or unset GMLAKE_LIB to use the bundled one" % _lib_path)
    if lib.gmlake_check_settings.argtypes is None:
        lib.gmlake_check_settings.restype = ctypes.c_int
        lib.gmlake_check_settings.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p, ctypes.c_size_t]
        lib.gmlake_settings_json.restype = ctypes.c_int
        lib.gmlake_settings_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def settings():
    """The settings table of the library (gmlake_settings_json): one dict per GMLAKE_ variable with its name,
    unit, range, default, read_by ("library", "python", "tests"), doc, and choices, knob or retired where they
    apply. docs/pytorch.md's table is checked against it."""
    return json.loads(_text(_settings_lib().gmlake_settings_json))


def check_config(environ=None, for_torch=True):
    """Checks gmlake's environment variables (environ, default os.environ) with the library's own parser
    (gmlake_check_settings: the one a device's engine start uses, and an engine started with them on the
    simulated device), and raises ConfigError with its one line naming the first bad variable; an unknown
    GMLAKE_ variable is refused too. Called by enable(), `python -m gmlake_torch` and GMLAKE=1's import hook.
    for_torch: GMLAKE_DEVICE=sim (the simulated device) is refused, PyTorch needs the GPU."""
    env = os.environ if environ is None else environ
    if for_torch and env.get("GMLAKE_DEVICE") == "sim":
        raise GMLakeConfigError("GMLAKE_DEVICE=sim is the simulated device (for tests without a GPU); PyTorch "
                                "needs the real GPU: unset GMLAKE_DEVICE")
    lib = _settings_lib()
    entries = [os.fsencode("%s=%s" % (k, v)) for k, v in env.items() if k.startswith("GMLAKE")]
    envp = (ctypes.c_char_p * (len(entries) + 1))(*entries)  # NULL-terminated, as envp
    text = _text(lambda buf, n: lib.gmlake_check_settings(envp, buf, n))
    if text:
        raise GMLakeConfigError(text)


def enable(lib_path=None, policy=None, mode=None, verbose=None, **knob_values):
    """Makes gmlake PyTorch's CUDA allocator. Must run before CUDA is initialised (before the first CUDA
    tensor, torch.cuda.init(), or anything else that touches the GPU); raises RuntimeError otherwise.

    policy: gmlake (default), caching, expandable or gmlake-paper (sets GMLAKE_POLICY).
    mode: "auto" (default, or GMLAKE_MODE): the C++ allocator ("cpp"), built against the installed torch on
      first use, else the pluggable fallback with a warning; "cpp" or "pluggable" force one (cpp raises if it
      cannot be built).
    knob_values: engine knobs, e.g. chunk_size="64MiB" (sets GMLAKE_CHUNK_SIZE); see knobs().
    Bad settings raise ConfigError (GMLakeConfigError) naming the variable, and change nothing (the arguments'
    variables are set only once the check passed). Returns the mode; calling it again returns it and changes
    nothing."""
    global _ext, _allocator, _mode
    if _mode is not None:
        return _mode
    import torch
    updates = {}  # the arguments as the variables they set: checked with the environment, then set
    if policy is not None:
        updates["GMLAKE_POLICY"] = str(policy)
    if verbose is not None:
        updates["GMLAKE_VERBOSE"] = "1" if verbose else ""
    if mode is not None:
        updates["GMLAKE_MODE"] = str(mode)
    lib = load(lib_path)
    names = set(knobs())
    for k, v in knob_values.items():
        name = k.upper()
        if name not in names:
            raise GMLakeConfigError("unknown gmlake knob %r: known knobs are %s" % (k, sorted(n.lower() for n in names)))
        updates["GMLAKE_" + name] = str(v)
    check_config(dict(os.environ, **updates))  # a refusal changes nothing
    os.environ.update(updates)
    verbose = os.environ.get("GMLAKE_VERBOSE", "").strip().lower() in ("1", "true")  # a boolean (the table's)
    if torch.cuda.is_initialized():
        raise RuntimeError("gmlake_torch.enable() must run before CUDA is initialised: call it at the top of "
                           "the program, before any CUDA tensor, torch.cuda.init() or model.cuda(); or use "
                           "`python -m gmlake_torch script.py` / GMLAKE=1")
    want = os.environ.get("GMLAKE_MODE") or "auto"
    how = None
    if want in ("auto", "cpp"):
        try:
            _ext = _enable_cpp(torch, lib, verbose)
            how = "cpp"
        except Exception as e:  # noqa: BLE001
            if want == "cpp":
                raise
            warnings.warn("gmlake_torch: the C++ allocator is not available (%s); using the pluggable fallback: "
                          "PyTorch's memory statistics, snapshots and CUDA graph pools do not work in it, and out "
                          "of memory is a RuntimeError" % str(e).splitlines()[0])
    if how is None:
        _allocator = _enable_pluggable(torch, lib)
        how = "pluggable"
    _mode = how
    if verbose:
        print("gmlake_torch: enabled (%s, library %s, policy %s)" %
              (how, _lib_path, os.environ.get("GMLAKE_POLICY") or "gmlake"), file=sys.stderr)
    return how


_EXT_VERSION = 1


def _enable_cpp(torch, lib, verbose):
    from . import _build
    path = _build.build(torch, _lib_path, verbose)
    ext = ctypes.CDLL(path)
    ext.gmlake_torch_version.restype = ctypes.c_int
    if ext.gmlake_torch_version() != _EXT_VERSION:
        raise GMLakeError("%s is version %d, this package expects %d" % (path, ext.gmlake_torch_version(), _EXT_VERSION))
    buf = ctypes.create_string_buffer(4096)
    ext.gmlake_torch_selftest.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    r = ext.gmlake_torch_selftest(buf, len(buf))
    if r != 0:
        raise GMLakeError("the C++ allocator's self test failed (%d): %r" % (r, buf.value.decode(errors="replace")))
    ext.gmlake_torch_install.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    if ext.gmlake_torch_install(buf, len(buf)) != 0:
        raise RuntimeError("gmlake_torch.enable(): " + buf.value.decode("utf-8", "replace"))
    return ext


def _enable_pluggable(torch, lib):
    # PyTorch turns every exception of the allocation function into a RuntimeError; start the engine now, so
    # that a bad setting (GMLakeConfigError), a missing driver or device (GMLakeError) is raised here with the
    # library's text, not at the first tensor (where gmlake_alloc_throw says only an out of memory is one).
    if lib.gmlake_start(_current_device()) != 0:
        raise _error()
    raw = torch._C._cuda_customAllocator(_addr(lib, "gmlake_alloc_throw"), _addr(lib, "gmlake_free"))
    hooks = {"set_init_fn": "gmlake_init", "set_reset_fn": "gmlake_empty_cache",
             "set_memory_fraction_fn": "gmlake_set_memory_fraction", "set_record_stream_fn": "gmlake_record_stream"}
    for setter, fn in hooks.items():
        if hasattr(raw, setter):
            getattr(raw, setter)(_addr(lib, fn))
    allocator = _Allocator(raw)
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise RuntimeError("gmlake_torch.enable(): PyTorch refused to swap its allocator (%s); call enable() "
                           "before anything touches CUDA" % e) from e
    return allocator


class _Allocator:
    """What torch.cuda.memory.change_current_allocator takes: an object whose allocator() is the C++ one."""

    def __init__(self, raw):
        self._allocator = raw

    def allocator(self):
        return self._allocator


def _addr(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

# Raw calls, for tests and microbenchmarks (no PyTorch involved).

def _raw_alloc(size, device=0, stream=0):
    """gmlake_alloc through ctypes: returns the address, or raises GMLakeError with the library's text."""
    p = load().gmlake_alloc(size, device, stream or None)
    if not p and size:
        raise _error()
    return p or 0


def _raw_free(ptr, device=0):
    load().gmlake_free(ptr or None, 0, device, None)


def _close(device=0):
    """gmlake_close: releases the engine of device; returns how many allocations were still live."""
    n = load().gmlake_close(device)
    if n < 0:
        raise _error()
    return n


class _Stat(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64), ("allocated", ctypes.c_int64),
                ("freed", ctypes.c_int64)]


_ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
           "active_bytes", "inactive_split_bytes", "requested_bytes")
_COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free")


class _DeviceStats(ctypes.Structure):
    """gmlake_device_stats of gmlake.h (PyTorch's DeviceStats)."""
    _fields_ = ([(n, _Stat * 3) for n in _ARRAYS] + [(n, ctypes.c_int64) for n in _COUNTERS] +
                [("oversize_allocations", _Stat), ("oversize_segments", _Stat), ("max_split_size", ctypes.c_int64)])


def _device_stats(device=0):
    """gmlake_get_device_stats as the flat dict torch.cuda.memory_stats() returns (same keys)."""
    s = _DeviceStats()
    if load().gmlake_get_device_stats(device, ctypes.byref(s)) != 0:
        raise _error()
    out = {}
    for n in _ARRAYS:
        for i, pool in enumerate(("all", "small_pool", "large_pool")):
            for f in ("current", "peak", "allocated", "freed"):
                out["%s.%s.%s" % (n, pool, f)] = getattr(getattr(s, n)[i], f)
    for n in _COUNTERS:
        out[n] = getattr(s, n)
    for n in ("oversize_allocations", "oversize_segments"):
        for f in ("current", "peak", "allocated", "freed"):
            out["%s.%s" % (n, f)] = getattr(getattr(s, n), f)
    out["max_split_size"] = s.max_split_size
    return out


def _raw_alloc_pool(size, pool, device=0, stream=0):
    """gmlake_alloc_pool: an allocation from the private pool (id0, id1)."""
    p = load().gmlake_alloc_pool(size, device, stream or None, pool[0], pool[1])
    if not p and size:
        raise _error()
    return p or 0


def _pool(op, pool, device=0):
    """gmlake_pool_<op> (create_or_incref, release, use_count) for pool (id0, id1); returns its count."""
    n = getattr(load(), "gmlake_pool_" + op)(device, pool[0], pool[1])
    if n < 0:
        raise _error()
    return n


def _pool_live(pool, device=0):
    """The live allocations of pool, in address order (gmlake_pool_live)."""
    cap = 256
    while True:
        arr = (ctypes.c_uint64 * cap)()
        n = load().gmlake_pool_live(device, pool[0], pool[1], arr, cap)
        if n < 0:
            raise _error()
        if n <= cap:
            return list(arr[:n])
        cap = n
