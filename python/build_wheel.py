#!/usr/bin/env python3
"""Writes the gmlake_torch wheel with nothing but the standard library (no setuptools, wheel or PyPI):

    python3 python/build_wheel.py --lib capi/libgmlake.so --out dist     # what `make wheel` runs

The wheel holds the package (Python, the C++ allocator's source csrc/gmlake_allocator.cc, gmlake.h), the
prebuilt libgmlake.so (so installing needs no Go) and gmlake_torch.pth (GMLAKE=1 enables gmlake in any
interpreter). It is tagged py3-none-linux_<machine>: the library is native code, the Python is version-free.
Installs with `pip install --no-index dist/gmlake_torch-*.whl`. It is also python/'s PEP 517 build backend
(pyproject.toml: backend-path), so `pip install ./python` builds the same wheel, offline, with no setuptools.
"""
import argparse
import base64
import hashlib
import os
import platform
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NAME = "gmlake_torch"


def version():
    """The package version, from pyproject.toml (one place)."""
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        sys.exit("build_wheel: no version in python/pyproject.toml")
    return m.group(1)


def files(lib, header):
    """(archive name, source path) of every file of the wheel's payload."""
    out = []
    pkg = os.path.join(HERE, NAME)
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith((".py", ".cc", ".h")):
                p = os.path.join(root, n)
                out.append((os.path.relpath(p, HERE).replace(os.sep, "/"), p))
    out.append((NAME + "/libgmlake.so", lib))
    out.append((NAME + "/gmlake.h", header))
    out.append((NAME + ".pth", os.path.join(HERE, NAME + ".pth")))
    return out


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(lib, header, out_dir):
    """Writes the wheel into out_dir and returns its path."""
    for f, what in ((lib, "libgmlake.so (run `make capi` in the gmlake repository)"), (header, "gmlake.h")):
        if not os.path.isfile(f):
            raise FileNotFoundError("build_wheel: %s not found: %s" % (f, what))
    ver = version()
    tag = "py3-none-linux_%s" % platform.machine()
    os.makedirs(out_dir, exist_ok=True)
    whl = os.path.join(out_dir, "%s-%s-%s.whl" % (NAME, ver, tag))
    info = "%s-%s.dist-info" % (NAME, ver)
    meta = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: gmlake, a GPU caching allocator with virtual "
            "memory stitching, as PyTorch's CUDA allocator\nRequires-Python: >=3.8\nLicense: Apache-2.0\n"
            % (NAME, ver))
    wheel = "Wheel-Version: 1.0\nGenerator: gmlake build_wheel.py\nRoot-Is-Purelib: false\nTag: %s\n" % tag
    records = []
    tmp = whl + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name, data, mode=0o644):
            zi = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            records.append(record_line(name, data))
        for name, path in files(lib, header):
            with open(path, "rb") as f:
                add(name, f.read(), 0o755 if name.endswith(".so") else 0o644)
        add(info + "/METADATA", meta.encode())
        add(info + "/WHEEL", wheel.encode())
        add(info + "/top_level.txt", (NAME + "\n").encode())
        rec = "\n".join(records + [info + "/RECORD,,"]) + "\n"
        zi = zipfile.ZipInfo(info + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        zi.external_attr = (0o100644) << 16
        z.writestr(zi, rec)
    os.replace(tmp, whl)
    return whl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", default=os.path.join(REPO, "capi", "libgmlake.so"))
    p.add_argument("--header", default=os.path.join(REPO, "capi", "gmlake.h"))
    p.add_argument("--out", default=os.path.join(REPO, "dist"))
    a = p.parse_args()
    try:
        print(build(a.lib, a.header, a.out))
    except FileNotFoundError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()


# ---- PEP 517 build backend (pyproject.toml: build-backend = "build_wheel", backend-path = ["."]) ----

def _sources():
    """libgmlake.so and gmlake.h for a source-folder install: $GMLAKE_LIB, else ../capi of the repository."""
    lib = os.environ.get("GMLAKE_LIB") or os.path.join(REPO, "capi", "libgmlake.so")
    return lib, os.path.join(os.path.dirname(lib) if os.environ.get("GMLAKE_LIB") else os.path.join(REPO, "capi"),
                             "gmlake.h")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    lib, header = _sources()
    if not os.path.isfile(header):
        header = os.path.join(REPO, "capi", "gmlake.h")
    return os.path.basename(build(lib, header, wheel_directory))


def get_requires_for_build_wheel(config_settings=None):
    return []
