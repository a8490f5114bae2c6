"""Tests of gmlake_torch that need neither a GPU nor PyTorch: the library runs on its simulated device.

    GMLAKE_LIB=capi/libgmlake.so GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=256MiB python3 -m unittest discover -s python/tests

capi/capi_test.go (TestPython) runs it after building the library.
"""
import os
import sys
import tempfile
import unittest

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
        self.assertEqual(gt.stats(0)["bad_frees"], 1)
        self.assertIn("not returned by Alloc", gt.last_error())

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
                self.assertEqual(f.read(), "a 0 4096 0\na 1 %d 1\nf 0\n" % (5 * MiB))

    def test_record_gz_and_nested_record_refused(self):
        import gzip
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.trace.gz")
            with gt.record(path):
                with self.assertRaises(gt.GMLakeError):
                    with gt.record(os.path.join(d, "other.trace")):
                        pass
                gt._raw_free(gt._raw_alloc(512))
            with gzip.open(path, "rt") as f:
                self.assertEqual(f.read(), "a 0 512 0\nf 0\n")

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


if __name__ == "__main__":
    unittest.main()
