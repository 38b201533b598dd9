"""pytest under mpiexec: every rank runs the same tests in the same order, so each
test's collectives meet. kolo is initialised once per process; a rank that fails
and exits shuts kolo down, which fails the other ranks' pending operations instead
of hanging them."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
sys.path.insert(0, os.path.join(REPO, "bindings", "python", "examples"))

import kolo  # noqa: E402
from kolo import _lib  # noqa: E402

kolo.init()


def needs(symbol):
    """Skips a test whose C function this libkolo does not export (yet)."""
    has = _lib.load().has(symbol)
    return pytest.mark.skipif(not has, reason="%s is not in %s" % (symbol, kolo.library_path()))


@pytest.fixture
def world():
    return kolo.rank(), kolo.size()
