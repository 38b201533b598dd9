"""kolo.init() is idempotent while kolo runs in this process, as Horovod's hvd.init()
is. (After another rank's shutdown it raises instead: init_after_shutdown.py, which
needs processes of its own.)"""

import numpy as np

import kolo


def test_init_again_does_nothing_while_running(world):
    r, n = world
    kolo.init()
    assert kolo.is_initialized()
    assert kolo.rank() == r
    out = kolo.allreduce(np.full(3, r, np.int64), op=kolo.Sum, name="after.init")
    np.testing.assert_array_equal(out, np.full(3, n * (n - 1) // 2, np.int64))

