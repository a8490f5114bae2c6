"""Enables gmlake the moment a process imports torch: for GMLAKE=1 (through gmlake_torch.pth, which the wheel
puts in site-packages, so every interpreter started with GMLAKE=1 gets it, whatever launched it) and for
`python -m gmlake_torch`. Waiting for torch's import (rather than importing torch at interpreter start) keeps
processes that never use torch, such as launchers and tools, free of it, and lets the program set its
environment first; what it cannot wait for is CUDA, which must not have started before torch finishes importing.

A bad setting stops the import of torch, before torch runs, with a ConfigError naming the variable (the
library's own check, gmlake_torch.check_config), and so does every later import of torch while the setting is
bad: never plain torch. If enable() fails once torch has run (CUDA already started, GMLAKE_MODE=cpp that cannot
be built), every later import of torch raises that error again. Uncaught, a ConfigError is one line on stderr,
not a traceback."""
import importlib.machinery
import sys

_installed = False


class _Finder:
    """Wraps torch's loader until gmlake is enabled: the settings are checked before torch runs, and enable()
    runs after it. Stays on sys.meta_path until enable() succeeded, so a failed import of torch fails again."""

    def __init__(self):
        self.failed = None  # enable()'s error after torch ran: said again at every import of torch

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self.failed is not None:
            raise type(self.failed)(*self.failed.args)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            # Wrap this loader instance's exec_module (the rest of the loader stays torch's own).
            inner = spec.loader.exec_module

            def exec_module(module):
                import gmlake_torch
                gmlake_torch.check_config()  # before torch runs: nothing of it is half-imported
                inner(module)
                try:
                    gmlake_torch.enable()
                except BaseException as e:
                    self.failed = e
                    raise
                if self in sys.meta_path:
                    sys.meta_path.remove(self)

            spec.loader.exec_module = exec_module
        return spec


def _hook():
    """Puts the finder on sys.meta_path (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _one_line_config_errors():
    """Makes an uncaught ConfigError print as its one line (the variable and what is wrong), not a traceback."""
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        import gmlake_torch
        if isinstance(value, gmlake_torch.GMLakeConfigError):
            sys.stderr.write("gmlake_torch.ConfigError: %s\n" % value)
            return
        previous(kind, value, tb)

    if getattr(previous, "__module__", None) != __name__:
        sys.excepthook = excepthook


def install(strict=False):
    """Checks the settings now (every time: GMLAKE=1's hook may have installed the finder already) and enables
    gmlake when torch is imported (now, if torch is already imported and CUDA has not started)."""
    global _installed
    import gmlake_torch
    _one_line_config_errors()
    gmlake_torch.check_config()
    _installed = True
    if "torch" in sys.modules:
        gmlake_torch.enable()
    else:
        _hook()


def from_pth():
    """Called by gmlake_torch.pth at interpreter start when GMLAKE is set to something other than 0/false.
    Checks nothing yet (an error raised in a .pth file is printed and ignored by Python, and the program may
    still set its environment): the settings are checked when torch is imported, and a bad one stops that
    import, every time."""
    global _installed
    if not _installed and "torch" not in sys.modules:
        _installed = True
        _one_line_config_errors()
        _hook()
