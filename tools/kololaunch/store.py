"""kolo's rendezvous store, served by the elastic driver for the whole job.

Note [The driver serves the store]
A store served by a rank dies with it: a worker that joins a generation whose
rank 0 is killed while the world forms kept dialing the dead store until
KOLO_INIT_TIMEOUT_SECONDS (300 s) ran out. The driver outlives every worker, so
it serves the store (libkolo's kolo_store_serve) and hands its address in
KOLO_STORE_ADDR and KOLO_STORE_PORT: the store never goes away under a forming
world, and a rank of a stale generation finds there that the others have moved
on, and fails at once. Without libkolo (a driver that cannot load it) rank 0
serves as before.

Note [A forming generation's timeout]
A worker killed after the driver assigned it a generation but before it published
its address leaves the others of that generation waiting in kolo_init for a rank
that never comes (the store cannot tell them: the dead rank never wrote there).
The driver gives elastic workers KOLO_INIT_TIMEOUT_SECONDS=30 unless the job sets
it (Horovod's gloo rendezvous waits 30 s too): the stuck ranks fail with
KOLO_ERR_TIMEOUT and re-form into the next generation, instead of waiting 300 s.
"""

import ctypes
import os


SONAME = "libkolo.so.0"


def _candidates():
    """KOLO_LIBRARY (a file or its folder), then the library beside this package:
    <build>/lib from <build>/share/kolo/kololaunch, <prefix>/lib from an
    installation, <checkout>/build/lib from the source tree; then the loader's
    own search."""
    env = os.environ.get("KOLO_LIBRARY")
    if env:
        return [os.path.join(env, SONAME) if os.path.isdir(env) else env]
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.join(here, "..", "..", "..", "lib"), os.path.join(here, "..", "..", "build", "lib")]
    return [os.path.normpath(os.path.join(f, SONAME)) for f in folders] + [SONAME]


def _library():
    failures = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            failures.append(str(e))
            continue
        try:
            lib.kolo_store_serve.restype = ctypes.c_int
            lib.kolo_store_serve.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_void_p)]
        except AttributeError:
            failures.append("%s has no kolo_store_serve" % path)
            continue
        lib.kolo_store_server_port.restype = ctypes.c_int
        lib.kolo_store_server_port.argtypes = [ctypes.c_void_p]
        lib.kolo_store_server_stop.restype = None
        lib.kolo_store_server_stop.argtypes = [ctypes.c_void_p]
        lib.kolo_last_error.restype = ctypes.c_char_p
        return lib, None
    return None, "; ".join(failures)


class StoreServer:
    """The store at (address, port) until stop()."""

    def __init__(self, lib, handle, address):
        self._lib, self._handle = lib, handle
        self.address = address
        self.port = lib.kolo_store_server_port(handle)

    def stop(self):
        if self._handle:
            self._lib.kolo_store_server_stop(self._handle)
            self._handle = None


def serve(address, token):
    """A StoreServer on `address` (a free port), or (None, why) when libkolo
    cannot serve one here."""
    lib, why = _library()
    if lib is None:
        return None, "libkolo not loaded (%s)" % why
    handle = ctypes.c_void_p()
    status = lib.kolo_store_serve(address.encode(), 0, token.encode(), ctypes.byref(handle))
    if status != 0:
        return None, lib.kolo_last_error().decode(errors="replace")
    return StoreServer(lib, handle, address), None
