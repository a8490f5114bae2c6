"""Enables gmlake the moment a process imports torch: for GMLAKE=1 (through gmlake_torch.pth, which the wheel
puts in site-packages, so every interpreter started with GMLAKE=1 gets it, whatever launched it) and for
`python -m gmlake_torch`. Waiting for torch's import (rather than importing torch at interpreter start) keeps
processes that never use torch, such as launchers and tools, free of it, and lets the program set its
environment first; what it cannot wait for is CUDA, which must not have started before torch finishes importing.

A bad setting stops the import of torch with a GMLakeConfigError naming the variable."""
import importlib.machinery
import sys

_installed = False


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            # Wrap this loader instance's exec_module (the rest of the loader stays torch's own).
            inner = spec.loader.exec_module

            def exec_module(module):
                inner(module)
                import gmlake_torch
                gmlake_torch.enable()

            spec.loader.exec_module = exec_module
        return spec


def install(strict=False):
    """Enables gmlake when torch is imported (now, if torch is already imported and CUDA has not started)."""
    global _installed
    if _installed:
        return
    _installed = True
    import gmlake_torch
    gmlake_torch.check_config()
    if "torch" in sys.modules:
        gmlake_torch.enable()
    else:
        sys.meta_path.insert(0, _Finder())


def from_pth():
    """Called by gmlake_torch.pth at interpreter start when GMLAKE is set to something other than 0/off. Checks
    nothing yet (an error raised in a .pth file is printed and ignored by Python): enable() checks the settings
    when torch is imported, and a bad one stops that import."""
    global _installed
    if not _installed and "torch" not in sys.modules:
        _installed = True
        sys.meta_path.insert(0, _Finder())
