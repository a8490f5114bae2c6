"""Source-folder install of gmlake_torch (`pip install --no-build-isolation ./python`, after `make capi`):
copies the library and its header from ../capi into the package and puts gmlake_torch.pth in site-packages.
Metadata is in pyproject.toml. The wheel (`make wheel`) needs none of this: python/build_wheel.py."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CAPI = os.path.join(HERE, "..", "capi")


class BuildPy(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "gmlake_torch")
        for name in ("libgmlake.so", "gmlake.h"):
            src = os.path.join(CAPI, name)
            if not os.path.isfile(src) and not os.path.isfile(os.path.join(HERE, "gmlake_torch", name)):
                raise SystemExit("gmlake_torch: %s not found: run `make capi` in the gmlake repository first, or "
                                 "install the wheel (`make wheel`)" % os.path.abspath(src))
            if os.path.isfile(src):
                shutil.copy(src, os.path.join(pkg, name))
        shutil.copy(os.path.join(HERE, "gmlake_torch.pth"), os.path.join(self.build_lib, "gmlake_torch.pth"))


setup(cmdclass={"build_py": BuildPy})
