"""kolo.torch.use_kolo_memory(): CPU tensors of at least ``min_bytes`` from memory
that the other ranks on the node can map (kolo_alloc), so that kolo reduces a large
tensor - a DistributedDataParallel gradient bucket, a tensor handed to
``kolo.torch.allreduce_`` - from the peers' buffers in place instead of through its
shared-memory slots (docs/pytorch.md, "Memory kolo hands out").

Call it on every rank before the tensors are made (before DistributedDataParallel
wraps the model: DDP makes its buckets then). It replaces PyTorch's CPU allocator
for the rest of the process, from libkolo_torch_memory beside libkolo (built where
torch's C++ headers were found: Debian's libtorch-dev).
"""

import ctypes
import os

import torch  # noqa: F401 (loads libc10, which libkolo_torch_memory needs)

from .. import _core

_LIBRARY_NAME = "libkolo_torch_memory.so"
_library = None


def _load():
    global _library
    if _library is None:
        path = os.path.join(os.path.dirname(_core.lib().path), _LIBRARY_NAME)
        if not os.path.exists(path):
            raise RuntimeError(
                "kolo.torch.use_kolo_memory: %s is not beside libkolo (%s): kolo was built "
                "without torch's C++ headers (install libtorch-dev and build again)"
                % (_LIBRARY_NAME, _core.lib().path))
        lib = ctypes.CDLL(path)
        lib.kolo_torch_memory_install.restype = ctypes.c_int
        lib.kolo_torch_memory_install.argtypes = [ctypes.c_size_t]
        lib.kolo_torch_memory_stats.restype = None
        lib.kolo_torch_memory_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 2
        _library = lib
    return _library


def use_kolo_memory(min_bytes=1 << 20):
    """From now on, CPU tensors of at least ``min_bytes`` (an int > 0; default 1 MiB,
    where kolo starts reading peers in place) come from kolo_alloc memory. May be
    called again to change the threshold. Works before ``init()``."""
    if not isinstance(min_bytes, int) or isinstance(min_bytes, bool) or min_bytes <= 0:
        raise ValueError("use_kolo_memory: min_bytes must be an int > 0, not %r" % (min_bytes,))
    if _load().kolo_torch_memory_install(min_bytes) != 0:
        raise RuntimeError("use_kolo_memory: the allocator refused min_bytes=%d" % min_bytes)


def kolo_memory_stats():
    """(bytes in live tensors, bytes of freed blocks kept for reuse) of kolo's CPU
    allocator; (0, 0) before use_kolo_memory()."""
    live, cached = ctypes.c_int64(), ctypes.c_int64()
    _load().kolo_torch_memory_stats(ctypes.byref(live), ctypes.byref(cached))
    return live.value, cached.value
