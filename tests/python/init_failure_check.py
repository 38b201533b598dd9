"""kolo.init() when one rank's KOLO_TRANSPORT is not a transport: every rank raises,
promptly, one message that names the rank and the bad value, and no source file.
Not a pytest module (conftest initialises kolo): run under mpiexec's MPMD form with
the bad value on one rank, e.g.

    mpiexec -n 1 -env KOLO_TRANSPORT bogus python3 init_failure_check.py 0 : \
            -n 1 python3 init_failure_check.py 0

The argument is the rank that holds the bad value.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import kolo  # noqa: E402


def main():
    bad_rank = int(sys.argv[1])
    me = os.environ.get("PMI_RANK", "?")
    start = time.monotonic()
    try:
        kolo.init()
    except kolo.KoloValueError as e:
        seconds = time.monotonic() - start
        text = str(e)
        print("[rank %s] kolo.init raised %s after %.2f s: %s" % (me, type(e).__name__, seconds,
                                                                  text), flush=True)
        wanted = ['kolo_init failed on rank %d' % bad_rank,
                  'KOLO_TRANSPORT="bogus" is not a transport']
        missing = [w for w in wanted if w not in text]
        assert not missing, "the message lacks %s" % missing
        assert ".cc:" not in text and "/src/" not in text, "the message names a source file"
        assert e.status == "KOLO_ERR_INVALID_ARGUMENT", e.status
        assert seconds < 20, "kolo.init took %.1f s to fail" % seconds
        assert not kolo.is_initialized()
        return
    kolo.shutdown()
    raise AssertionError("[rank %s] kolo.init() succeeded; it should have raised" % me)


if __name__ == "__main__":
    main()
