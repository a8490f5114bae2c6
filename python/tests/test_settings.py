"""gmlake_torch's settings check is the library's (issue 36 item 3): one parser and one table for every entry
point (check_config, enable(), `python -m gmlake_torch`, GMLAKE=1's import hook); a bad setting is one clear
line, every time. Needs no GPU and no torch (a stand-in torch package where an import is needed).

    GMLAKE_LIB=capi/libgmlake.so GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=256MiB python3 -m unittest discover -s python/tests
"""
import os
import subprocess
import sys
import tempfile
import unittest

if not os.environ.get("GMTEST_INSTALLED"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gmlake_torch as gt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _env(extra):
    """The test's environment with gmlake's settings replaced by extra (the library under test kept)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GMLAKE")}
    if os.environ.get("GMLAKE_LIB"):
        e["GMLAKE_LIB"] = os.path.abspath(os.environ["GMLAKE_LIB"])
    e.update(extra)
    return e


def _python(args, env, cwd=None, path=()):
    """Runs a Python with env (and path first on PYTHONPATH, then this source tree unless installed)."""
    pp = list(path)
    if not os.environ.get("GMTEST_INSTALLED"):
        pp.append(os.path.join(HERE, ".."))
    env = dict(env, PYTHONPATH=os.pathsep.join(pp)) if pp else env
    return subprocess.run([sys.executable] + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def _fake_torch(d, cuda_started=False):
    """A stand-in torch package in d: importing it says so on stderr; its CUDA counts as started or not."""
    os.makedirs(os.path.join(d, "torch"))
    with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
        f.write("import sys\nsys.stderr.write('FAKE TORCH IMPORTED\\n')\n"
                "class cuda:\n    @staticmethod\n    def is_initialized():\n        return %r\n" % cuda_started)


# Values the old up-front check of gmlake_torch let through and the library refused only at the first
# allocation, or that the two read differently; and their good neighbours.
BAD = [("GMLAKE_CHUNK_SIZE", "lots"), ("GMLAKE_CHUNK_SIZE", "3MiB"), ("GMLAKE_MEMORY_LIMIT", "99999999999999999999"),
       ("GMLAKE_MEMORY_LIMIT", "17179869184GiB"), ("GMLAKE_MEMORY_LIMIT", "0.5"), ("GMLAKE_SIM_CAPACITY", "1MiB"),
       ("GMLAKE_SBLOCK_CACHE", "1.5"), ("GMLAKE_DEFRAG_LEVEL", "7"), ("GMLAKE_REUSE_LIMIT", "nan"),
       ("GMLAKE_NO_CROSS_STREAM", "maybe"), ("GMLAKE_VERBOSE", "2"), ("GMLAKE_POLICY", "fast")]
GOOD = [("GMLAKE_CHUNK_SIZE", "64MiB"), ("GMLAKE_MEMORY_LIMIT", "1TiB"), ("GMLAKE_MEMORY_LIMIT", "0.0625 GiB"),
        ("GMLAKE_SIM_CAPACITY", "2MiB"), ("GMLAKE_SBLOCK_CACHE", "-1"), ("GMLAKE_DEFRAG_LEVEL", "3"),
        ("GMLAKE_REUSE_LIMIT", "2.5"), ("GMLAKE_NO_CROSS_STREAM", "true"), ("GMLAKE_VERBOSE", "0")]

# Starts device 0's engine of the library with the environment given and says whether its first allocation
# succeeded, and why not.
START = ("import gmlake_torch as g\ntry:\n    g._raw_free(g._raw_alloc(4096))\n    print('START ok')\n"
         "except (g.GMLakeError, g.GMLakeConfigError) as e:\n    print('START refused', e)\n")


class TestOneParser(unittest.TestCase):
    def _library_starts(self, name, value):
        env = _env({"GMLAKE_DEVICE": "sim", "GMLAKE_SIM_CAPACITY": "256MiB", name: value})
        r = _python(["-c", START], env)
        self.assertIn("START ", r.stdout, r.stderr)
        return "START ok" in r.stdout, r.stdout + r.stderr

    def test_check_refuses_what_the_library_refuses_naming_the_variable(self):
        for name, value in BAD:
            with self.subTest(setting="%s=%s" % (name, value)):
                with self.assertRaises(gt.ConfigError) as cm:
                    gt.check_config({name: value}, for_torch=False)
                self.assertIn(name, str(cm.exception))
                self.assertEqual(len(str(cm.exception).splitlines()), 1, str(cm.exception))
                started, out = self._library_starts(name, value)
                self.assertFalse(started, out)

    def test_what_the_check_accepts_the_library_starts_with(self):
        for name, value in GOOD:
            with self.subTest(setting="%s=%s" % (name, value)):
                gt.check_config({name: value}, for_torch=False)
                started, out = self._library_starts(name, value)
                self.assertTrue(started, out)

    def test_the_table_comes_from_the_library(self):
        table = {s["name"]: s for s in gt.settings()}
        for name in ("GMLAKE_MEMORY_LIMIT", "GMLAKE_MEMORY_FRACTION", "GMLAKE_POLICY", "GMLAKE_MODE", "GMLAKE"):
            self.assertIn(name, table)
        self.assertEqual(table["GMLAKE_MEMORY_LIMIT"]["unit"], "bytes")
        self.assertEqual(sorted("GMLAKE_" + k for k in gt.knobs()),
                         sorted(n for n, s in table.items() if s.get("knob")))

    def test_a_library_that_cannot_be_loaded_is_one_clear_error(self):
        # No second parser to fall back to: the check says why it cannot run, in one line.
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "libgmlake.so")
            with open(bad, "w") as f:
                f.write("not a shared library\n")
            code = ("import gmlake_torch as g\ntry:\n    g.check_config({'GMLAKE_POLICY': 'gmlake'})\n"
                    "except g.ConfigError as e:\n    print('REFUSED', e)\n")
            r = _python(["-c", code], _env({"GMLAKE_LIB": bad}))
            self.assertIn("REFUSED", r.stdout, r.stderr)
            self.assertIn("cannot be loaded", r.stdout)
            self.assertEqual(len(r.stdout.strip().splitlines()), 1, r.stdout)

    def test_enable_with_a_bad_setting_changes_nothing(self):
        # enable(policy=..., **knobs) sets the variables, checks them, and on a refusal puts them back.
        code = ("import os, gmlake_torch as g\ntry:\n    g.enable(policy='caching', chunk_size='lots')\n"
                "except g.ConfigError as e:\n    print('REFUSED', e)\n"
                "print('LEFT', sorted(k for k in os.environ if k in ('GMLAKE_POLICY', 'GMLAKE_CHUNK_SIZE')), g.mode())\n")
        with tempfile.TemporaryDirectory() as d:
            _fake_torch(d)
            r = _python(["-c", code], _env({}), cwd=d, path=[d])
            self.assertIn("REFUSED GMLAKE_CHUNK_SIZE", r.stdout, r.stderr)
            self.assertIn("LEFT [] None", r.stdout, r.stderr)


class TestEntryPoints(unittest.TestCase):
    def test_python_m_checks_the_settings_with_GMLAKE_1_exported(self):
        # GMLAKE=1's .pth hook (from_pth) ran first, as it does at interpreter start once the wheel is installed.
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write("print('RAN')\n")
            code = ("import sys, gmlake_torch._autoenable as a; a.from_pth(); from gmlake_torch.__main__ import main; "
                    "sys.exit(main(sys.argv[1:]))")
            r = _python(["-c", code, script], _env({"GMLAKE": "1", "GMLAKE_CHUNK_SIZE": "lots"}))
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("RAN", r.stdout)
            self.assertIn("GMLAKE_CHUNK_SIZE", r.stderr)

    def test_a_config_error_is_one_line_from_python_m(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write("print('RAN')\n")
            r = _python(["-m", "gmlake_torch", script], _env({"GMLAKE_MEMORY_LIMIT": "0.5"}))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertNotIn("RAN", r.stdout)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("GMLAKE_MEMORY_LIMIT", r.stderr)

    def test_a_failed_import_of_torch_fails_the_same_way_every_time(self):
        # A bad setting made by the program before it imports torch (GMLAKE=1's hook checks at that import),
        # and a good setting whose enable() fails after torch's import (CUDA already started): the second import
        # must not silently give plain torch.
        prog = ("import os, gmlake_torch._autoenable as a\na.from_pth()\n%s\nfor i in (1, 2):\n    try:\n"
                "        import torch\n        print('IMPORT', i, 'plain torch')\n    except Exception as e:\n"
                "        print('IMPORT', i, type(e).__name__, str(e).splitlines()[0])\n")
        for setup, cuda_started, says in (("os.environ['GMLAKE_POLICY'] = 'fast'", False, "GMLAKE_POLICY"),
                                          ("", True, "before CUDA is initialised")):
            with self.subTest(says=says), tempfile.TemporaryDirectory() as d:
                _fake_torch(d, cuda_started)
                r = _python(["-c", prog % setup], _env({"GMLAKE": "1"}), cwd=d, path=[d])
                lines = [l for l in r.stdout.splitlines() if l.startswith("IMPORT")]
                self.assertEqual(len(lines), 2, r.stdout + r.stderr)
                self.assertNotIn("plain torch", r.stdout, r.stderr)
                self.assertEqual(lines[0][len("IMPORT 1"):], lines[1][len("IMPORT 2"):], r.stdout)
                self.assertIn(says, lines[0])

    def test_a_config_error_under_GMLAKE_1_is_one_line(self):
        prog = "import gmlake_torch._autoenable as a\na.from_pth()\nimport torch\nprint('AFTER IMPORT')\n"
        with tempfile.TemporaryDirectory() as d:
            _fake_torch(d)
            r = _python(["-c", prog], _env({"GMLAKE": "1", "GMLAKE_MEMORY_FRACTION": "2"}), cwd=d, path=[d])
            self.assertNotIn("AFTER IMPORT", r.stdout)
            self.assertNotIn("FAKE TORCH IMPORTED", r.stderr)  # refused before torch ran
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("GMLAKE_MEMORY_FRACTION", r.stderr)
            self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main()
