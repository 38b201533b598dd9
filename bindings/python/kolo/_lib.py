"""Finding and loading libkolo, and the ctypes signatures of include/kolo/kolo.h.

This module is the only place that knows the C ABI. It loads the shared library
once, on first use, from (in this order):

1. ``KOLO_LIBRARY`` - a path to ``libkolo.so`` or to the folder that holds it;
2. the build tree this package sits in (``<checkout>/build/lib``), for a package
   used straight from ``bindings/python`` of a built checkout;
3. install prefixes: ``sys.prefix``, ``/usr/local`` and ``/usr``, each with
   ``lib``, ``lib64`` and the Debian multiarch ``lib/<triplet>``;
4. the dynamic loader's own search (``LD_LIBRARY_PATH``, ``ldconfig``).

When none works, :class:`LibraryNotFoundError` names every path tried and why
each failed.

Symbols are looked up lazily: a library that predates a collective still loads,
and calling that collective raises :class:`~kolo.exceptions.UnsupportedError`
naming the missing symbol and the library file, rather than failing at import.

ctypes releases the GIL for the duration of every foreign call, so a thread
blocked in ``kolo_wait`` lets other Python threads run.
"""

import ctypes
import os
import sys
import sysconfig
import threading

from .exceptions import LibraryNotFoundError, UnsupportedError

_SONAMES = ("libkolo.so", "libkolo.so.0")

# kolo_status_t values (include/kolo/kolo.h; tests/python/test_abi.py checks that
# these, the dtypes, ops and device kinds below match it).
OK = 0
IN_PROGRESS = 1
ERR_INVALID_ARGUMENT = 2
ERR_NOT_INITIALIZED = 3
ERR_ALREADY_INITIALIZED = 4
ERR_DUPLICATE_NAME = 5
ERR_MISMATCH = 6
ERR_SHUTDOWN = 7
ERR_TIMEOUT = 8
ERR_STALLED = 9
ERR_UNSUPPORTED = 10
ERR_TRANSPORT = 11
ERR_INTERNAL = 12
ERR_RANK_FAILED = 13

# kolo_dtype_t values.
UINT8, INT8, UINT16, INT16, INT32, INT64 = 0, 1, 2, 3, 4, 5
FLOAT16, BFLOAT16, FLOAT32, FLOAT64, BOOL = 6, 7, 8, 9, 10

# kolo_op_t values.
OP_SUM, OP_AVERAGE, OP_MIN, OP_MAX, OP_PRODUCT, OP_ADASUM = 0, 1, 2, 3, 4, 5

# kolo_device_kind_t values.
DEVICE_CPU, DEVICE_CUDA = 0, 1


class Device(ctypes.Structure):
    """kolo_device_t, passed by value."""

    _fields_ = [("kind", ctypes.c_int32), ("index", ctypes.c_int32), ("stream", ctypes.c_void_p)]


CPU_DEVICE = Device(DEVICE_CPU, 0, None)

MAX_DIMS = 16  # KOLO_MAX_DIMS


class Shape(ctypes.Structure):
    """kolo_shape_t."""

    _fields_ = [("ndim", ctypes.c_int32), ("dims", ctypes.POINTER(ctypes.c_int64))]


class Options(ctypes.Structure):
    """kolo_options_t (a NULL pointer means the defaults)."""

    _fields_ = [("process_set", ctypes.c_int32), ("flags", ctypes.c_int32),
                ("shapes", ctypes.POINTER(Shape))]


OPTION_DETERMINISTIC = 1  # KOLO_OPTION_DETERMINISTIC


_OPTIONS = {}  # (shapes, process_set, deterministic) -> a built Options
_OPTIONS_KEPT = 1024


def options(shapes=None, process_set=0, deterministic=False):
    """A kolo_options_t for the *_ex calls: `shapes` is a list of shapes (tuples of
    ints; one per tensor) or None; `deterministic` sets KOLO_OPTION_DETERMINISTIC.
    The returned object keeps its arrays alive. kolo reads it during the call
    only, so one object serves every call with the same arguments: a training
    loop asks for the same few again and again, and building one took about 9 us
    of a small c10d call under cProfile (docs/pytorch.md, "Synchronous calls")."""
    key = (None if shapes is None else tuple(tuple(s) for s in shapes), process_set,
           bool(deterministic))
    opts = _OPTIONS.get(key)
    if opts is None:
        if len(_OPTIONS) >= _OPTIONS_KEPT:
            _OPTIONS.clear()
        opts = _OPTIONS[key] = _build_options(shapes, process_set, deterministic)
    return opts


def _build_options(shapes, process_set, deterministic):
    opts = Options(process_set, OPTION_DETERMINISTIC if deterministic else 0, None)
    if shapes is not None:
        shape_array = (Shape * len(shapes))()
        keep = []
        for i, shape in enumerate(shapes):
            dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            keep.append(dims)
            shape_array[i].ndim = len(shape)
            shape_array[i].dims = dims
        opts.shapes = shape_array
        opts._keep = (shape_array, keep)
    return opts

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_handle = ctypes.c_void_p
_handle_p = ctypes.POINTER(ctypes.c_void_p)
_status = ctypes.c_int
_cstr = ctypes.c_char_p
_ptr = ctypes.c_void_p
_i64 = ctypes.c_int64
_dbl = ctypes.c_double
_opts_p = ctypes.POINTER(Options)

# name -> (restype, argtypes). Every function of kolo.h.
_SIGNATURES = {
    "kolo_init": (_status, []),
    "kolo_init_comm": (_status, [_i64]),
    "kolo_init_store": (_status, [_cstr, ctypes.c_int, ctypes.c_int, ctypes.c_int, _cstr, _i64]),
    "kolo_shutdown": (_status, []),
    "kolo_store_serve": (_status, [_cstr, ctypes.c_int, _cstr, ctypes.POINTER(ctypes.c_void_p)]),
    "kolo_store_server_port": (ctypes.c_int, [ctypes.c_void_p]),
    "kolo_store_server_stop": (None, [ctypes.c_void_p]),
    "kolo_is_initialized": (ctypes.c_int, []),
    "kolo_rank": (ctypes.c_int, []),
    "kolo_size": (ctypes.c_int, []),
    "kolo_local_rank": (ctypes.c_int, []),
    "kolo_local_size": (ctypes.c_int, []),
    "kolo_cross_rank": (ctypes.c_int, []),
    "kolo_cross_size": (ctypes.c_int, []),
    "kolo_autotune_state": (
        _status, [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_i64), ctypes.POINTER(ctypes.c_uint64)]),
    "kolo_version": (_cstr, []),
    "kolo_build_info_json": (_cstr, []),
    "kolo_transport_built": (ctypes.c_int, [_cstr, ctypes.POINTER(_cstr)]),
    "kolo_status_string": (_cstr, [_status]),
    "kolo_last_error": (_cstr, []),
    "kolo_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "kolo_alloc": (_status, [ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "kolo_free": (_status, [_ptr]),
    "kolo_allreduce_async": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _handle_p]),
    "kolo_allgather_async": (
        _status, [_cstr, _ptr, _i64, _i64, ctypes.c_int, Device, _handle_p]),
    "kolo_allgather_into_async": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, Device, _handle_p]),
    "kolo_broadcast_async": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, Device, _handle_p]),
    "kolo_alltoall_async": (
        _status, [_cstr, _ptr, _i64, _i64, _c_int64_p, ctypes.c_int, Device, _handle_p]),
    "kolo_reducescatter_async": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _handle_p]),
    "kolo_reducescatter_shard_rows": (_i64, [_i64, ctypes.c_int, ctypes.c_int]),
    "kolo_grouped_allreduce_async": (
        _status, [ctypes.c_int, ctypes.POINTER(_cstr), ctypes.POINTER(_ptr), ctypes.POINTER(_ptr),
                  _c_int64_p, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device, _handle_p]),
    "kolo_barrier": (_status, []),
    "kolo_join": (_status, [_c_int_p]),
    # Blocking; the package waits through handles instead, in slices that let
    # Ctrl-C through (docs/c-api.md). Declared for callers of the C API.
    "kolo_allreduce": (_status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int]),
    "kolo_allreduce_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _opts_p]),
    "kolo_allgather": (_status, [_cstr, _ptr, _i64, _i64, ctypes.c_int, _handle_p]),
    "kolo_allgather_ex": (
        _status, [_cstr, _ptr, _i64, _i64, ctypes.c_int, Device, _opts_p, _handle_p]),
    "kolo_allgather_into": (_status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int]),
    "kolo_allgather_into_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, Device, _opts_p]),
    "kolo_broadcast": (_status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int]),
    "kolo_broadcast_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, Device, _opts_p]),
    "kolo_alltoall": (
        _status, [_cstr, _ptr, _i64, _i64, _c_int64_p, ctypes.c_int, _handle_p]),
    "kolo_alltoall_ex": (
        _status, [_cstr, _ptr, _i64, _i64, _c_int64_p, ctypes.c_int, Device, _opts_p,
                  _handle_p]),
    "kolo_reducescatter": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, ctypes.c_int]),
    "kolo_reducescatter_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _opts_p]),
    "kolo_allreduce_async_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _opts_p, _handle_p]),
    "kolo_allgather_async_ex": (
        _status, [_cstr, _ptr, _i64, _i64, ctypes.c_int, Device, _opts_p, _handle_p]),
    "kolo_allgather_into_async_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, Device, _opts_p, _handle_p]),
    "kolo_broadcast_async_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, ctypes.c_int, ctypes.c_int, Device, _opts_p,
                  _handle_p]),
    "kolo_alltoall_async_ex": (
        _status, [_cstr, _ptr, _i64, _i64, _c_int64_p, ctypes.c_int, Device, _opts_p,
                  _handle_p]),
    "kolo_reducescatter_async_ex": (
        _status, [_cstr, _ptr, _ptr, _i64, _i64, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _opts_p, _handle_p]),
    "kolo_grouped_allreduce_async_ex": (
        _status, [ctypes.c_int, ctypes.POINTER(_cstr), ctypes.POINTER(_ptr), ctypes.POINTER(_ptr),
                  _c_int64_p, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device, _opts_p,
                  _handle_p]),
    "kolo_grouped_allgather_async": (
        _status, [ctypes.c_int, ctypes.POINTER(_cstr), ctypes.POINTER(_ptr), _c_int64_p,
                  _c_int64_p, ctypes.c_int, Device, _opts_p, _handle_p]),
    "kolo_grouped_reducescatter_async": (
        _status, [ctypes.c_int, ctypes.POINTER(_cstr), ctypes.POINTER(_ptr), ctypes.POINTER(_ptr),
                  _c_int64_p, _c_int64_p, ctypes.c_int, ctypes.c_int, _dbl, _dbl, Device,
                  _opts_p, _handle_p]),
    "kolo_barrier_ex": (_status, [_opts_p]),
    "kolo_join_ex": (_status, [_opts_p, _c_int_p]),
    "kolo_timeline_start": (_status, [_cstr, ctypes.c_int]),
    "kolo_timeline_stop": (_status, []),
    "kolo_process_set_add": (_status, [_c_int_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)]),
    "kolo_process_set_remove": (_status, [ctypes.c_int32]),
    "kolo_process_set_rank": (ctypes.c_int, [ctypes.c_int32]),
    "kolo_process_set_size": (ctypes.c_int, [ctypes.c_int32]),
    "kolo_process_set_ranks": (_status, [ctypes.c_int32, _c_int_p, ctypes.c_int, _c_int_p]),
    "kolo_process_set_included": (ctypes.c_int, [ctypes.c_int32]),
    "kolo_poll": (_status, [_handle, _c_int_p]),
    "kolo_wait": (_status, [_handle, _dbl]),
    "kolo_handle_status": (_status, [_handle]),
    "kolo_handle_message": (_cstr, [_handle]),
    "kolo_handle_output": (_status, [_handle, ctypes.POINTER(_ptr), _c_int64_p]),
    "kolo_handle_splits": (_status, [_handle, _c_int64_p, ctypes.c_int]),
    "kolo_handle_phases": (_status, [_handle, _c_int64_p, ctypes.c_int]),
    "kolo_handle_stream_wait": (_status, [_handle, _ptr]),
    "kolo_handle_release": (None, [_handle]),
}


def _package_build_dirs():
    """<checkout>/build/lib when this package is bindings/python/kolo of a checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.normpath(os.path.join(here, "..", "..", ".."))
    if not os.path.isfile(os.path.join(checkout, "include", "kolo", "kolo.h")):
        return []
    return [os.path.join(checkout, "build", "lib")]


def _prefix_dirs():
    triplet = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = []
    for prefix in dict.fromkeys([sys.prefix, "/usr/local", "/usr"]):
        for sub in ("lib", "lib64", os.path.join("lib", triplet) if triplet else None):
            if sub:
                dirs.append(os.path.join(prefix, sub))
    return dirs


def candidates():
    """Every path the loader tries, in order (see the module comment)."""
    paths = []
    env = os.environ.get("KOLO_LIBRARY")
    if env:
        if os.path.isdir(env):
            paths.extend(os.path.join(env, so) for so in _SONAMES)
        else:
            paths.append(env)
        return paths, True
    for d in _package_build_dirs() + _prefix_dirs():
        paths.append(os.path.join(d, _SONAMES[0]))
    paths.append(_SONAMES[1])  # bare soname: the dynamic loader's own search
    return paths, False


class Library:
    """The loaded libkolo with lazily resolved, typed functions.

    Thread-safe: resolution of a symbol happens at most once under a lock.
    """

    def __init__(self, cdll, path):
        self._cdll = cdll
        self.path = path
        self._functions = {}
        self._lock = threading.Lock()

    def has(self, name):
        try:
            self.fn(name)
            return True
        except UnsupportedError:
            return False

    def fn(self, name):
        f = self._functions.get(name)
        if f is not None:
            return f
        with self._lock:
            try:
                f = getattr(self._cdll, name)
            except AttributeError:
                raise UnsupportedError(
                    "%s is not in %s: this libkolo predates that function; rebuild kolo "
                    "or point KOLO_LIBRARY at a newer build" % (name, self.path)) from None
            f.restype, f.argtypes = _SIGNATURES[name]
            self._functions[name] = f
        return f

    def __getattr__(self, name):
        if name.startswith("kolo_"):
            return self.fn(name)
        raise AttributeError(name)


_library = None
_load_lock = threading.Lock()


def load():
    """The process's libkolo, loaded on first call."""
    global _library
    if _library is not None:
        return _library
    with _load_lock:
        if _library is None:
            _library = _load()
    return _library


def _load():
    paths, from_env = candidates()
    failures = []
    for path in paths:
        if os.path.sep in path and not os.path.exists(path):
            failures.append("%s (no such file)" % path)
            continue
        try:
            cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            failures.append("%s (%s)" % (path, e))
            continue
        if not hasattr(cdll, "kolo_init"):
            failures.append("%s (loaded, but it has no kolo_init: not libkolo)" % path)
            continue
        return Library(cdll, _resolved_path(cdll, path))
    where = "KOLO_LIBRARY=%s" % os.environ["KOLO_LIBRARY"] if from_env else \
        "the build tree, the install prefixes and the dynamic loader"
    raise LibraryNotFoundError(
        "cannot load libkolo from %s. Tried:\n  %s\nBuild kolo (tools/build.sh), install it, "
        "or set KOLO_LIBRARY to the path of libkolo.so." % (where, "\n  ".join(failures)))


def _resolved_path(cdll, fallback):
    """The file the loader actually opened (for messages), via dladdr."""
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
        libdl = ctypes.CDLL(None)
        info = DlInfo()
        addr = ctypes.cast(cdll.kolo_init, ctypes.c_void_p)
        if libdl.dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return fallback
