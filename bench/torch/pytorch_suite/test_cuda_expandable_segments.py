# Copied from pytorch/pytorch test/test_cuda_expandable_segments.py at commit 079f90097f3a95c53dee49374203a895885478f4
# (licence: LICENSE beside this file). Verbatim; lines marked '# gmlake:' are ours: it runs
# the copy test_cuda_allocator.py beside it (taken from test/test_cuda.py at commit
# 000e43cdff99f30291164c1f2e90133f19fa83fb) instead of test_cuda. SOURCE.md says more.

# Owner(s): ["module: cuda"]
# run time cuda tests, but with the allocator using expandable segments

import os


# Must precede the test_cuda import: EXPANDABLE_SEGMENTS in
# torch.testing._internal.common_utils reads PYTORCH_CUDA_ALLOC_CONF once at
# import time. Setting it here lets the @skipIf(not EXPANDABLE_SEGMENTS, ...)
# guards on expandable-only tests in test_cuda.py run in this runner. We
# restore the prior env state below (after the import) so subprocesses
# spawned by tests don't inherit expandable_segments:True, which would
# conflict with backend:cudaMallocAsync and similar settings those
# subprocesses set themselves.
_PRIOR_ALLOC_CONF = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import pathlib
import sys

from test_cuda_allocator import (  # noqa: F401  # gmlake: was test_cuda; the copy beside this file
    TestBlockStateAbsorption,
    TestCuda,
    TestCudaMallocAsync,  # gmlake: was TestCudaAllocator, the later name (pytorch#176181) of this class
    TestMemPool,
)

import torch
try: from torch.testing._internal.common_cuda import IS_JETSON  # gmlake: was one import of both names, wrapped
except ImportError: IS_JETSON = False  # gmlake: fallback if the installed torch lacks it
try: from torch.testing._internal.common_cuda import IS_WINDOWS  # gmlake: wrapped, as above
except ImportError: IS_WINDOWS = False  # gmlake: fallback if the installed torch lacks it
try: from torch.testing._internal.common_utils import run_tests  # gmlake: wrapped, as above
except ImportError: from unittest import main as run_tests  # gmlake: fallback if the installed torch lacks it


# Restore prior env state. EXPANDABLE_SEGMENTS has already been resolved at
# import time above; the runtime allocator is forced into expandable mode
# via _set_allocator_settings in __main__ below.
if _PRIOR_ALLOC_CONF is None:
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
else:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = _PRIOR_ALLOC_CONF

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

try:  # gmlake: tools/ is in a PyTorch checkout, not here (and it fetches the list over the network)
    from tools.stats.import_test_stats import get_disabled_tests  # gmlake: indented into the try
except ImportError:  # gmlake: without it, no test is marked disabled
    def get_disabled_tests(*args, **kwargs):  # gmlake: no-op stand-in
        pass  # gmlake


# Make sure to remove REPO_ROOT after import is done
sys.path.remove(str(REPO_ROOT))

if __name__ == "__main__":
    if torch.cuda.is_available() and not IS_JETSON and not IS_WINDOWS:
        get_disabled_tests(".")
        torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        run_tests()
