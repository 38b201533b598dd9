"""The seam between kolo.elastic and kolo's runtime: how a process leaves one world
and joins the next generation's. One place, so that the C API's re-forming (issue
31, point 1) replaces three calls here and nothing else.

Note [The re-forming seam]
kolo.elastic needs from the C API exactly this, the same on every rank:
- kolo_shutdown() returns on every rank even when peers died or the world broke
  (it never waits for a rank that is not there), and leaves the process able to
  call kolo_init() again;
- kolo_init() reads its world from the environment at each call: with
  KOLO_WORLD=socket, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
  KOLO_STORE_PORT, KOLO_JOB_TOKEN and KOLO_GENERATION (kolorun --elastic hands
  each generation's values; the store is served by the new rank 0), it forms the
  world of that generation; ranks of another generation never join it, and it
  fails within KOLO_INIT_TIMEOUT_SECONDS naming who did not come;
- a failure of a peer is KOLO_ERR_RANK_FAILED (RankFailedError, a
  HorovodInternalError) on every survivor, not a hang.
So reform() is shutdown(), the new generation's variables put in os.environ (the
C library reads them through getenv), init(). A later kolo_reinit(generation)
would replace the three calls; a world that cannot re-form (the MPI world) makes
init() fail or form the old membership, never a mixed one.
"""

import os

from .. import _core
from ..exceptions import KoloError, NotInitializedError


class KoloWorld:
    """kolo's runtime in this process, as kolo.elastic sees it."""

    def rank(self):
        return _core.rank()

    def size(self):
        return _core.size()

    def shutdown(self):
        """Leaves the current world; a world that already broke is left quietly."""
        try:
            _core.shutdown()
        except (KoloError, NotInitializedError):
            pass

    def init(self):
        _core.init()

    def reform(self, env):
        """Leaves this world and joins the one `env` describes (the variables that
        change: see Note [The re-forming seam])."""
        self.shutdown()
        os.environ.update({k: str(v) for k, v in env.items()})
        self.init()
