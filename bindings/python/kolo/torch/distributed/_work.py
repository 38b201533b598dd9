"""The Work objects the kolo process group returns, each around a torch future
that completes on kolo's completion (_completion.watch).

Note [Two kinds of Work]
torch 1.13 offers two ways to make a Work from Python, and each has a flaw that
the other has not:
- ``_create_work_from_future(fut)`` is a C++ object, safe for C++ to keep, but
  its wait() swallows the future's error (it waits without rethrowing);
- a Python subclass of Work (through c10d's PyWork trampoline) raises from wait(),
  but C++ holds only the C++ half: once Python drops the object, a C++ call of
  wait() reaches the base Work, which never completes.
So a call from torch.distributed's Python API (distributed_c10d.py, which hands
the Work to Python code) gets the Python KoloWork, whose wait() raises kolo's
error as a RuntimeError; a call from C++ (DDP's reducer, _broadcast_coalesced,
_verify_params_across_processes) gets the C++ kind. C++ callers that read the
future (DDP's buckets) still see the error; those that only wait() do not, so
such a failure also marks the group failed (_process_group.py, Note [A failure
C++ cannot see]).
"""

import os
import sys

import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import Work, _create_work_from_future

from ._completion import complete_here

_C10D_FILE = os.path.splitext(os.path.normcase(os.path.abspath(c10d.__file__)))[0]


class KoloWork(Work):
    """A collective in flight, for Python callers; wait() raises its error."""

    def __init__(self, entry):
        super().__init__()
        self._entry = entry
        self._future = entry.future

    def wait(self, timeout=None):
        complete_here(self._entry)  # Note [A waiting caller completes its own operation]
        self._future.wait()  # raises the collective's RuntimeError
        return True

    def get_future(self):
        return self._future

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except RuntimeError:
            return False
        return True

    def exception(self):
        if not self._future.done():
            return None
        try:
            self._future.value()
        except RuntimeError as e:
            return e
        return None

    def result(self):
        return self._future.value()

    def synchronize(self):
        """CPU work: complete once the future is."""

    def source_rank(self):
        raise RuntimeError("kolo backend: source_rank() is only defined for recv from any "
                           "source, which kolo does not offer")


_IS_C10D = {}  # a code object's file name -> whether it is distributed_c10d's


def _from_python_api(depth):
    """True when the frame `depth` levels up is torch.distributed's Python API."""
    try:
        frame = sys._getframe(depth)
    except ValueError:  # no Python frame: called from C++ on a C++ thread
        return False
    name = frame.f_code.co_filename
    known = _IS_C10D.get(name)
    if known is None:  # one look at each file name: this runs on every call
        known = _IS_C10D[name] = (
            os.path.splitext(os.path.normcase(os.path.abspath(name)))[0] == _C10D_FILE)
    return known


def for_python(depth):
    """Whether the frame `depth` levels above this function's caller is
    torch.distributed's Python API (Note [Two kinds of Work])."""
    return _from_python_api(depth + 2)


def make_work(entry, python):
    """The Work for a watched operation (_completion.watch): KoloWork for a Python
    caller, else the C++ kind around its future."""
    return KoloWork(entry) if python else _create_work_from_future(entry.future)
