"""Builds gmlake's C++ CUDAAllocator (csrc/gmlake_allocator.cc) against the installed torch, once, and caches it.

The library's vtable is torch's CUDAAllocator of the installed version, so it is compiled per torch version,
C++ ABI, libgmlake path and compiler (the cache key), into $GMLAKE_CACHE (default ~/.cache/gmlake_torch).
Several processes (torchrun ranks) may build at once: a file lock makes one build and the others wait.

Link rule (the old OOM shim's crash under torch 2.11): the library must use the process's own libstdc++.so.6.
Linked the usual way (`g++ -shared`) on a machine whose g++ finds a static libstdc++.a, the shim carried a
private copy of libstdc++: its std::locale facet ids disagreed with the process's, the first `ostream <<
size_t` in the out-of-memory message fetched the wrong facet (codecvt<char16_t> for num_put) and crashed. So the
object is linked with the C driver (no implicit -lstdc++) against the libstdc++.so.6 the process has loaded, and
gmlake_torch_selftest() formats and throws once at enable time.
"""

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "csrc", "gmlake_allocator.cc")


class BuildError(RuntimeError):
    """The C++ allocator could not be built here (no compiler, no headers, a compile or link error)."""


def header_dir(lib_path):
    """The folder holding gmlake.h: beside the package (wheel), or capi/ of the repository (source tree)."""
    for d in (HERE, os.path.dirname(lib_path), os.path.join(HERE, "..", "..", "capi")):
        if os.path.isfile(os.path.join(d, "gmlake.h")):
            return os.path.abspath(d)
    raise BuildError("gmlake.h not found beside the package, beside %s or in the repository's capi/" % lib_path)


def _mapped(prefix):
    """The path of the first library mapped into this process whose file name starts with prefix, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith(prefix):
                    return parts[5]
    except OSError:
        pass
    return None


def cuda_include(torch):
    """A folder with cuda_runtime_api.h: $CUDA_HOME/include, torch's CUDA_HOME, the nvidia pip packages."""
    cands = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "include"))
    try:
        from torch.utils import cpp_extension
        if cpp_extension.CUDA_HOME:
            cands.append(os.path.join(cpp_extension.CUDA_HOME, "include"))
    except Exception:  # noqa: BLE001 (cpp_extension imports setuptools; optional here)
        pass
    site = os.path.dirname(os.path.dirname(torch.__file__))
    nv = os.path.join(site, "nvidia")
    if os.path.isdir(nv):
        for d in sorted(os.listdir(nv)):
            cands += [os.path.join(nv, d, "include"), os.path.join(nv, "cuda_runtime", "include")]
    cands.append("/usr/local/cuda/include")
    for c in cands:
        if os.path.isfile(os.path.join(c, "cuda_runtime_api.h")):
            return c
    raise BuildError("no CUDA headers (cuda_runtime_api.h) found: set CUDA_HOME (tried %s)" % ", ".join(cands))


def cache_dir():
    d = os.environ.get("GMLAKE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gmlake_torch")
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    d = os.path.join(tempfile.gettempdir(), "gmlake_torch-%d" % os.getuid())
    os.makedirs(d, exist_ok=True)
    return d


@contextlib.contextmanager
def _locked(path):
    import fcntl
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError("%s\n%s" % (" ".join(cmd), (r.stderr or r.stdout)[-4000:]))
    return r.stdout


def build(torch, lib_path, verbose=False):
    """Returns the path of the C++ allocator library for this torch, building it if it is not cached."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise BuildError("no C++ compiler: install g++ or set CXX")
    cc = shutil.which("gcc") or shutil.which("cc")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    tdir = os.path.dirname(torch.__file__)
    tinc, tlib = os.path.join(tdir, "include"), os.path.join(tdir, "lib")
    if not os.path.isfile(os.path.join(tinc, "c10", "cuda", "CUDACachingAllocator.h")):
        raise BuildError("this torch has no C++ headers (%s/c10/cuda/CUDACachingAllocator.h)" % tinc)
    cinc = cuda_include(torch)
    hdir = header_dir(lib_path)
    import torch.cuda  # noqa: F401  (loads libc10_cuda and libcudart, so that they are found in the maps)
    stdcpp = _mapped("libstdc++.so")
    cudart = _mapped("libcudart.so")
    if not cudart:
        raise BuildError("libcudart is not loaded by torch (a CPU-only torch?)")
    with open(SOURCE, "rb") as f:
        src = f.read()
    with open(os.path.join(hdir, "gmlake.h"), "rb") as f:
        hdr = f.read()
    version = _run([cxx, "--version"]).splitlines()[0]
    key = hashlib.sha256(b"\0".join([src, hdr] + [str(x).encode() for x in (
        torch.__version__, abi, tdir, os.path.abspath(lib_path), stdcpp, cudart, cxx, version, sys.version)])
    ).hexdigest()[:16]
    cache = cache_dir()
    out = os.path.join(cache, "gmlake_allocator-torch%s-%s.so" % (torch.__version__.replace("+", "_"), key))
    if os.path.isfile(out):
        return out
    with _locked(out + ".lock"):
        if os.path.isfile(out):  # another process built it while we waited
            return out
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            obj = os.path.join(tmp, "gmlake_allocator.o")
            so = os.path.join(tmp, "gmlake_allocator.so")
            std_err = []
            for std in ("c++17", "c++20"):
                try:
                    _run([cxx, "-O2", "-std=" + std, "-fPIC", "-DNDEBUG", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi,
                          "-I" + tinc, "-I" + cinc, "-I" + hdir, "-c", SOURCE, "-o", obj])
                    break
                except BuildError as e:
                    std_err.append(str(e))
            else:
                raise BuildError("compiling %s failed:\n%s" % (SOURCE, "\n".join(std_err)))
            libdir = os.path.dirname(os.path.abspath(lib_path))
            libs = ["-L" + tlib, "-lc10_cuda", "-lc10", cudart, "-L" + libdir, "-l:" + os.path.basename(lib_path),
                    "-Wl,-rpath," + tlib, "-Wl,-rpath," + libdir, "-Wl,-rpath," + os.path.dirname(cudart)]
            if stdcpp:
                # The process's own libstdc++, first, so that nothing of a static libstdc++.a is pulled in.
                libs = [stdcpp] + libs
            linker = cc if (cc and stdcpp) else cxx
            _run([linker, "-shared", "-Wl,--no-undefined", obj, "-o", so] + libs + ["-lm", "-lgcc_s", "-lc"])
            os.replace(so, out + ".tmp")
            os.replace(out + ".tmp", out)
    if verbose:
        print("gmlake_torch: built the C++ allocator %s" % out, file=sys.stderr)
    return out
