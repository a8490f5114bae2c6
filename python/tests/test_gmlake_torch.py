"""Tests of gmlake_torch that need neither a GPU nor PyTorch: the library runs on its simulated device.

    GMLAKE_LIB=capi/libgmlake.so GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=256MiB python3 -m unittest discover -s python/tests

capi/capi_test.go (TestPython) runs it after building the library; python/tests/wheel_test.sh runs it against
the installed wheel (GMTEST_INSTALLED=1: the package is imported from site-packages, not this tree).
"""
import os
import sys
import tempfile
import unittest

if not os.environ.get("GMTEST_INSTALLED"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gmlake_torch as gt  # noqa: E402

MiB = 1 << 20


@unittest.skipUnless(os.environ.get("GMLAKE_DEVICE") == "sim", "needs GMLAKE_DEVICE=sim (no GPU is used)")
class TestWithoutTorch(unittest.TestCase):
    def tearDown(self):
        gt._close(0)

    def test_stats_report_live_and_peak_bytes(self):
        self.assertEqual(gt.stats(0)["initialized"], False)
        a = gt._raw_alloc(3 * MiB)
        b = gt._raw_alloc(1000, stream=0x55)
        s = gt.stats(0)
        self.assertTrue(s["initialized"])
        self.assertEqual(s["num_live"], 2)
        self.assertEqual(s["requested_bytes"], 3 * MiB + 1000)
        self.assertGreaterEqual(s["reserved_bytes"], s["allocated_bytes"])
        gt._raw_free(a)
        gt._raw_free(b)
        s = gt.stats(0)
        self.assertEqual(s["num_live"], 0)
        self.assertGreaterEqual(s["peak_allocated_bytes"], 3 * MiB)
        self.assertTrue(0 <= s["fragmentation"] < 1)
        self.assertIn("driver_calls", s)

    def test_out_of_memory_raises_with_the_library_text(self):
        hog = gt._raw_alloc(200 * MiB)
        with self.assertRaises(gt.GMLakeError) as cm:
            gt._raw_alloc(100 * MiB)
        self.assertIn("out of memory", str(cm.exception).lower())
        self.assertEqual(gt.stats(0)["alloc_failures"], 1)
        gt._raw_free(hog)

    def test_bad_free_is_counted_not_fatal(self):
        gt._raw_alloc(MiB)  # starts the engine
        gt._raw_free(0xdead000)
        self.assertIn("not returned by Alloc", gt.last_error())  # read before the next call clears it
        self.assertEqual(gt.stats(0)["bad_frees"], 1)

    def test_a_successful_call_clears_the_last_error(self):
        # Issue 36 item 2: last_error said the last failure forever, so a caller could not tell whether its
        # last call failed.
        gt._raw_free(0xdead000, device=5)
        self.assertIn("no engine runs on device 5", gt.last_error())
        self.assertEqual(gt.load().gmlake_last_error_kind(), 2)  # GMLAKE_ERR_INVALID
        gt.stats(0)
        self.assertEqual(gt.last_error(), "")
        self.assertEqual(gt.load().gmlake_last_error_kind(), 0)

    def test_errors_keep_their_kind(self):
        # Issue 36 item 2: a bad device, a bad setting, a missing driver were all "out of memory".
        with self.assertRaises(gt.GMLakeArgumentError) as cm:
            gt._raw_alloc(MiB, device=64)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertNotIn("out of memory", str(cm.exception).lower())
        hog = gt._raw_alloc(200 * MiB)
        with self.assertRaises(gt.GMLakeOutOfMemoryError):
            gt._raw_alloc(100 * MiB)
        gt._raw_free(hog)
        for env, cls in (("nope", gt.GMLakeConfigError), ("cuda", gt.GMLakeError)):
            saved = os.environ.get("GMLAKE_DEVICE")
            os.environ["GMLAKE_DEVICE"] = env
            try:
                p = gt._raw_alloc(MiB, device=7)  # device 7 starts now, with this setting
            except gt.GMLakeError as e:
                err = e
            except gt.GMLakeConfigError as e:
                err = e
            else:
                gt._raw_free(p, device=7)
                err = None  # GMLAKE_DEVICE=cuda on a machine with a GPU
            finally:
                os.environ["GMLAKE_DEVICE"] = saved
                gt._close(7)
            if err is None and env == "cuda":
                continue
            self.assertIsInstance(err, cls, "GMLAKE_DEVICE=%s: %r" % (env, err))
            self.assertNotIsInstance(err, gt.GMLakeOutOfMemoryError, "GMLAKE_DEVICE=%s" % env)
            self.assertNotIn("out of memory", str(err).lower())
            self.assertIn("GMLAKE_DEVICE" if env == "nope" else "CUDA device 7", str(err))

    def test_pluggable_fallback_says_a_bad_setting_before_swapping_the_allocator(self):
        # Issue 36 item 2: in the fallback, PyTorch makes every exception of the allocation a RuntimeError, and
        # gmlake_alloc_throw used to word them all as out of memory; enable() now starts the engine first, so a
        # bad GMLAKE_DEVICE is a GMLakeConfigError from enable(), and torch (here: a bare object) is not touched.
        saved = os.environ.get("GMLAKE_DEVICE")
        os.environ["GMLAKE_DEVICE"] = "nope"
        try:
            with self.assertRaises(gt.GMLakeConfigError) as cm:
                gt._enable_pluggable(object(), gt.load())
        finally:
            os.environ["GMLAKE_DEVICE"] = saved
        self.assertIn("GMLAKE_DEVICE", str(cm.exception))
        self.assertIsNone(gt.mode())

    def test_set_memory_fraction_refuses_what_pytorch_refuses(self):
        # Issue 36 item 2: these did nothing, silently; torch.cuda.set_per_process_memory_fraction raises.
        for bad in (2.0, -1, -0.1, float("nan"), float("inf")):
            with self.assertRaises(ValueError, msg=repr(bad)):
                gt.set_memory_fraction(bad, 0)
        for dev in (-1, 64, 1 << 20):
            with self.assertRaises(ValueError, msg="device %d" % dev):
                gt.set_memory_fraction(0.5, dev)
        for bad in ("0.5", None, True):
            with self.assertRaises(TypeError, msg=repr(bad)):
                gt.set_memory_fraction(bad, 0)
        self.assertEqual(gt.load().gmlake_set_memory_fraction(float("nan"), 0), -1)  # the C function too
        self.assertEqual(gt.load().gmlake_set_memory_fraction(0.5, 0), 0)
        self.assertEqual(gt.load().gmlake_get_memory_fraction(0), 0.5)
        # 0 is a cap of 0 bytes, as torch.cuda.set_per_process_memory_fraction(0) is; get returns it exactly
        gt.set_memory_fraction(0, 0)
        self.assertEqual(gt.load().gmlake_get_memory_fraction(0), 0.0)
        gt.set_memory_fraction(1.0, 0)

    def test_record_writes_the_trace_format(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.trace")
            before = gt._raw_alloc(MiB)
            with gt.record(path):
                x = gt._raw_alloc(4096)
                y = gt._raw_alloc(5 * MiB, stream=0x77)
                gt._raw_free(before)  # allocated before the trace: skipped
                gt._raw_free(x)
            gt._raw_free(y)
            with open(path) as f:
                lines = f.read().splitlines(keepends=True)
            self.assertTrue(lines[0].startswith("# gmlake-trace v2 "), lines[0])  # '#' lines frame the events
            self.assertEqual("".join(l for l in lines if not l.startswith("#")), "a 0 4096 0\na 1 %d 1\nf 0\n" % (5 * MiB))

    def test_record_gz_and_nested_record_refused(self):
        import gzip
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.trace.gz")
            with gt.record(path):
                with self.assertRaises(gt.GMLakeError):
                    with gt.record(os.path.join(d, "other.trace")):
                        pass
                gt._raw_free(gt._raw_alloc(512))
            with gzip.open(path, "rt") as f:  # a gzip member per block: gzip reads them as one stream
                self.assertEqual("".join(l for l in f if not l.startswith("#")), "a 0 512 0\nf 0\n")

    def test_memory_fraction_caps_reserved_memory(self):
        gt._raw_free(gt._raw_alloc(MiB))
        gt.empty_cache()
        gt.set_memory_fraction(0.25, 0)  # 64 MiB of 256
        with self.assertRaises(gt.GMLakeError):
            gt._raw_alloc(100 * MiB)
        gt.set_memory_fraction(1.0, 0)
        gt._raw_free(gt._raw_alloc(100 * MiB))

    def test_knobs_are_listed(self):
        ks = gt.knobs()
        self.assertIsInstance(ks, list)
        self.assertTrue(all(k == k.upper() and " " not in k for k in ks))

    def test_not_enabled_without_torch(self):
        self.assertIsNone(gt.mode())
        self.assertFalse(gt.enabled())


def _fake_torch(d):
    """A stand-in torch package in d (no real torch here): importing it records the import, and its CUDA counts
    as started, so that gmlake's enable(), run by the import hook, must refuse with its own error."""
    os.makedirs(os.path.join(d, "torch"))
    with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
        f.write("import sys\nsys.stderr.write('FAKE TORCH IMPORTED\\n')\n"
                "class cuda:\n    @staticmethod\n    def is_initialized():\n        return True\n")


# The keys torch.cuda.memory_stats() returns under PyTorch's native allocator (torch 2.11,
# torch/csrc/cuda/Module.cpp: every Stat array of DeviceStats for all / small_pool / large_pool, the counters,
# the two oversize stats and max_split_size).
NATIVE_KEYS = sorted(
    ["%s.%s.%s" % (n, p, f) for n in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                                      "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
     for p in ("all", "small_pool", "large_pool") for f in ("current", "peak", "allocated", "freed")] +
    ["num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
     "max_split_size"] +
    ["%s.%s" % (n, f) for n in ("oversize_allocations", "oversize_segments")
     for f in ("current", "peak", "allocated", "freed")])


def _implemented(call):
    """Runs call; a library built before the engine side of the ABI landed says "not implemented yet": skip."""
    try:
        return call()
    except gt.GMLakeError as e:
        if "not implemented yet" in str(e):
            raise unittest.SkipTest("this libgmlake does not implement it yet: %s" % e)
        raise


@unittest.skipUnless(os.environ.get("GMLAKE_DEVICE") == "sim", "needs GMLAKE_DEVICE=sim (no GPU is used)")
class TestTorchABI(unittest.TestCase):
    """The C ABI the C++ CUDAAllocator uses (gmlake.h, torch engine part), driven through ctypes."""

    def tearDown(self):
        gt._close(0)

    def test_device_stats_have_pytorchs_keys_and_follow_the_live_set(self):
        a = gt._raw_alloc(3 * MiB)
        b = gt._raw_alloc(1000)
        s = _implemented(lambda: gt._device_stats(0))
        self.assertEqual(sorted(s), NATIVE_KEYS)
        self.assertEqual(s["allocation.all.current"], 2)
        self.assertEqual(s["requested_bytes.all.current"], 3 * MiB + 1000)
        self.assertEqual(s["allocation.small_pool.current"] + s["allocation.large_pool.current"], 2)
        self.assertGreaterEqual(s["reserved_bytes.all.current"], s["allocated_bytes.all.current"])
        gt._raw_free(a)
        gt._raw_free(b)
        s = gt._device_stats(0)
        self.assertEqual(s["allocation.all.current"], 0)
        self.assertEqual(s["allocated_bytes.all.current"], 0)
        self.assertGreaterEqual(s["allocated_bytes.all.peak"], 3 * MiB)
        self.assertEqual(s["allocated_bytes.all.allocated"] - s["allocated_bytes.all.freed"], 0)
        _implemented(lambda: gt.load().gmlake_reset_peak_stats(0) == 0 or gt._device_stats(0))
        self.assertEqual(gt._device_stats(0)["allocated_bytes.all.peak"], 0)

    def test_pool_blocks_are_listed_live_and_the_pool_counts_uses(self):
        gt._raw_free(gt._raw_alloc(MiB))  # starts the engine
        pool = (1, 0)
        self.assertEqual(_implemented(lambda: gt._pool("create_or_incref", pool)), 1)
        p = gt._raw_alloc_pool(2 * MiB, pool)
        q = gt._raw_alloc_pool(4096, pool)
        self.assertEqual(gt._pool_live(pool), sorted([p, q]))
        self.assertEqual(gt._pool("use_count", pool), 1)
        gt._raw_free(q)
        self.assertEqual(gt._pool_live(pool), [p])
        gt._raw_free(p)
        self.assertEqual(gt._pool("release", pool), 0)

    def test_snapshot_lists_segments_that_hold_the_live_blocks(self):
        a = gt._raw_alloc(5 * MiB)
        snap = _implemented(lambda: gt.snapshot(0))
        blocks = [b for s in snap["segments"] for b in s["blocks"]]
        live = [b for b in blocks if b["state"] == "active_allocated"]
        self.assertIn(a, [b["address"] for b in live])
        total = sum(s["total_size"] for s in snap["segments"])
        self.assertEqual(total, gt._device_stats(0)["reserved_bytes.all.current"])
        gt._raw_free(a)


class TestConfigAndEntryPoints(unittest.TestCase):
    """Settings are checked at enable time (the error names the variable); the zero-change entry points."""

    def test_bad_settings_name_the_variable(self):
        for env, var in (({"GMLAKE_POLICY": "fast"}, "GMLAKE_POLICY"), ({"GMLAKE_MODE": "c"}, "GMLAKE_MODE"),
                         ({"GMLAKE_MEMORY_FRACTION": "2"}, "GMLAKE_MEMORY_FRACTION"),
                         ({"GMLAKE_MEMORY_LIMIT": "lots"}, "GMLAKE_MEMORY_LIMIT"),
                         ({"GMLAKE_DEVICE": "sim"}, "GMLAKE_DEVICE"), ({"GMLAKE_CHUNKSIZE": "1"}, "GMLAKE_CHUNKSIZE"),
                         ({"GMLAKE": "maybe"}, "GMLAKE"), ({"GMLAKE_SHIM": "1"}, "GMLAKE_SHIM"),
                         ({"GMLAKE_TIME_DRIVER": "yes"}, "GMLAKE_TIME_DRIVER"),
                         ({"GMLAKE_CUDA_HANDLES": "posix_fd,rmda"}, "GMLAKE_CUDA_HANDLES")):
            with self.assertRaises(gt.GMLakeConfigError) as cm:
                gt.check_config(env)
            self.assertIn(var, str(cm.exception))
        gt.check_config({"GMLAKE_POLICY": "expandable", "GMLAKE_MEMORY_LIMIT": "40GiB", "GMLAKE": "1",
                         "GMLAKE_TIME_DRIVER": "1", "GMLAKE_CUDA_HANDLES": "posix_fd,rdma"})

    def _run(self, args, env=None, cwd=None, pythonpath_set=False):
        import subprocess
        e = dict(os.environ)
        e.pop("GMLAKE_DEVICE", None)
        e.update(env or {})
        if e.get("GMLAKE_LIB"):
            e["GMLAKE_LIB"] = os.path.abspath(e["GMLAKE_LIB"])
        if not os.environ.get("GMTEST_INSTALLED") and not pythonpath_set:
            e["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        return subprocess.run([sys.executable] + args, env=e, cwd=cwd, capture_output=True, text=True, timeout=60)

    def test_python_m_runs_the_script_with_its_arguments(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write("import sys, gmlake_torch._autoenable as a\n"
                        "print('ARGS', sys.argv, __name__, any(type(x).__name__ == '_Finder' for x in sys.meta_path))\n")
            r = self._run(["-m", "gmlake_torch", script, "--lr", "1e-4"], cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("ARGS ['%s', '--lr', '1e-4'] __main__ True" % script, r.stdout)

    def test_python_m_stops_on_a_bad_setting(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write("print('RAN')\n")
            r = self._run(["-m", "gmlake_torch", script], env={"GMLAKE_POLICY": "fast"})
            self.assertNotEqual(r.returncode, 0)
            self.assertNotIn("RAN", r.stdout)
            self.assertIn("GMLAKE_POLICY", r.stderr)

    def test_python_m_enables_gmlake_when_the_script_imports_torch(self):
        with tempfile.TemporaryDirectory() as d:
            _fake_torch(d)
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write("import torch\nprint('AFTER IMPORT')\n")
            env = {"PYTHONPATH": d + os.pathsep + os.environ.get("PYTHONPATH", "")}
            if not os.environ.get("GMTEST_INSTALLED"):
                env["PYTHONPATH"] += os.pathsep + os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
            r = self._run(["-m", "gmlake_torch", script], env=env, pythonpath_set=True)
            self.assertIn("FAKE TORCH IMPORTED", r.stderr)
            self.assertIn("must run before CUDA is initialised", r.stderr)  # enable() ran, after torch's import
            self.assertNotIn("AFTER IMPORT", r.stdout)
            r = self._run(["-m", "gmlake_torch", script], env=dict(env, GMLAKE_POLICY="fast"), pythonpath_set=True)
            self.assertIn("GMLAKE_POLICY", r.stderr)
            self.assertNotIn("FAKE TORCH IMPORTED", r.stderr)  # refused before the script ran

    @unittest.skipUnless(os.environ.get("GMTEST_INSTALLED"), "the .pth file exists only once installed")
    def test_gmlake_1_enables_gmlake_when_any_program_imports_torch(self):
        with tempfile.TemporaryDirectory() as d:
            _fake_torch(d)
            env = {"PYTHONPATH": d, "GMLAKE": "1"}
            r = self._run(["-c", "import torch; print('AFTER IMPORT')"], env=env, pythonpath_set=True)
            self.assertIn("FAKE TORCH IMPORTED", r.stderr)
            self.assertIn("must run before CUDA is initialised", r.stderr)
            r = self._run(["-c", "import torch"], env=dict(env, GMLAKE_MEMORY_FRACTION="2"), pythonpath_set=True)
            self.assertIn('gmlake_torch.ConfigError: GMLAKE_MEMORY_FRACTION="2"', r.stderr)  # one line
            self.assertNotIn("Traceback", r.stderr)
            r = self._run(["-c", "import torch; print('AFTER IMPORT')"], env=dict(env, GMLAKE="0"),
                          pythonpath_set=True)
            self.assertIn("AFTER IMPORT", r.stdout)

    @unittest.skipUnless(os.environ.get("GMTEST_INSTALLED"), "the .pth file exists only once installed")
    def test_gmlake_1_hooks_the_import_of_torch_at_interpreter_start(self):
        code = "import sys; print('HOOK', any(type(x).__name__ == '_Finder' for x in sys.meta_path))"
        self.assertIn("HOOK True", self._run(["-c", code], env={"GMLAKE": "1"}).stdout)
        self.assertIn("HOOK False", self._run(["-c", code], env={"GMLAKE": "0"}).stdout)


if __name__ == "__main__":
    unittest.main()
