"""A stand-in for the `expecttest` package, which torch.testing._internal imports
but Debian does not package (and this machine reaches no other registry). The
suite uses it only as the base class of its TestCase; inline expected-output
assertions are not used by the distributed tests, and refuse plainly if called."""

import unittest

ACCEPT = False  # expecttest's "rewrite the expected strings" switch: never here


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (its API's name)
        raise unittest.SkipTest("expecttest is not installed (tests/python/torch_suite/shims)")

    def assertExpectedRaisesInline(self, exc_type, callable_, expect, *args, **kwargs):  # noqa: N802
        raise unittest.SkipTest("expecttest is not installed (tests/python/torch_suite/shims)")
