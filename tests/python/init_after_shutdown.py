"""kolo.init() after another rank's shutdown raises ShutdownError (it used to return
as if kolo still ran), until this rank calls kolo.shutdown() too.

Run under mpiexec -n 2 or more, by CTest (python.init_after_shutdown.npN), not by
pytest: kolo initialises MPI here, so a shutdown ends MPI for the process and no
later test could run in it.
"""

import sys
import time

import kolo


def main():
    kolo.init()
    rank = kolo.rank()
    kolo.init()  # while running: does nothing
    assert kolo.is_initialized()
    kolo.barrier()  # every rank has seen that before rank 0 shuts down
    if rank == 0:
        kolo.shutdown()
        return 0
    deadline = time.monotonic() + 60
    while kolo.is_initialized() and time.monotonic() < deadline:
        time.sleep(0.002)
    assert not kolo.is_initialized(), "rank 0's shutdown did not reach rank %d" % rank
    for _ in range(2):  # and again: it stays an error until this rank shuts down
        try:
            kolo.init()
        except kolo.ShutdownError as e:
            assert "shut down by another rank" in str(e), str(e)
            assert e.status == "KOLO_ERR_SHUTDOWN", e.status
        else:
            print("rank %d: kolo.init() after rank 0's shutdown did not raise" % rank,
                  file=sys.stderr)
            return 1
    kolo.shutdown()
    assert not kolo.is_initialized()
    return 0


if __name__ == "__main__":
    sys.exit(main())
