"""A minimal stand-in for the `expecttest` package: gmlake's own code, not a copy of it.

torch.testing._internal.common_utils needs expecttest (`import expecttest`, then
`class TestCase(expecttest.TestCase)`, reading and setting `expecttest.ACCEPT` from its
--accept flag, and `super().assertExpectedInline(...)` in its TestCase). The GPU machine
that runs this suite has torch but not expecttest, and no network to install it, so
pytorch_suite.sh puts this folder on PYTHONPATH. If the real package is installed and
comes first on the path, it is used instead.

This stand-in only compares; it never rewrites a test's source the way the real
package does under EXPECTTEST_ACCEPT=1 (with ACCEPT set, a mismatch still fails, and
says so).
"""

import difflib
import os
import textwrap
import unittest

# Read by common_utils (getattr(expecttest, "ACCEPT", False)) and set from its --accept.
ACCEPT = os.getenv("EXPECTTEST_ACCEPT")

_CPP_STACK_HEADER = "\nException raised from"


def _normalize(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return textwrap.dedent(text).strip()


def _diff(expect, actual):
    return "\n".join(
        difflib.unified_diff(
            expect.splitlines(),
            actual.splitlines(),
            fromfile="expected",
            tofile="actual",
            lineterm="",
        )
    )


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        """Assert that actual equals the inline string expect, after dedent and strip
        of both. skip (frames to skip to find the literal) matters only to the real
        package's accept mode and is ignored here."""
        if not isinstance(actual, str):
            actual = str(actual)
        self.assertMultiLineEqualMaybeCppStack(_normalize(expect), _normalize(actual))

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        """Like assertExpectedInline, on str() of the exc_type that callable(*args,
        **kwargs) must raise."""
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(msg="Did not raise when expected to")

    def assertMultiLineEqualMaybeCppStack(self, expect, actual, *args, **kwargs):
        """expect must equal actual, or a prefix of it that a C++ stack trace
        ("\\nException raised from ...") follows, as in PyTorch's error messages."""
        if actual == expect:
            return
        if actual.startswith(expect) and actual[len(expect) :].startswith(
            _CPP_STACK_HEADER
        ):
            return
        note = (
            " (EXPECTTEST_ACCEPT is set, but this stand-in cannot rewrite sources)"
            if ACCEPT
            else ""
        )
        msg = kwargs.get("msg") or (args[0] if args else None)
        text = "inline expectation does not match" + note + ":\n" + _diff(expect, actual)
        if msg:
            text += "\n" + str(msg)
        self.fail(text)
