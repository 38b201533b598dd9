"""State and ObjectState: what an elastic training loop commits, restores and
syncs (Horovod's horovod/common/elastic.py, the same names and behaviour).

- commit(): save() the state in host memory, then check_host_updates();
- restore(): back to the last save (after a HorovodInternalError);
- sync(): every rank takes rank 0's state (after re-forming; Note [Rank 0
  survives] in kolorun's elastic driver says why rank 0 has it);
- check_host_updates(): rank 0 asks the driver whether hosts changed since this
  generation formed, broadcasts the answer, and every rank raises
  HostsUpdatedInterrupt at the same step (skip_sync when hosts were only
  removed: the survivors' states agree already);
- register_reset_callbacks(fns): called after each re-forming, after reset().

ObjectState keeps its attributes in deep copies (Horovod keeps references, so a
list changed in place after a commit was not restored; here it is).
"""

import copy
import pickle

import numpy as np

from . import _job
from .. import _core, _numpy_ops
from ..exceptions import HostsUpdatedInterrupt
from ._driver import UPDATE_REMOVED


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's `obj` (anything picklable) on every rank, through kolo's NumPy
    broadcast: its length, then its bytes."""
    name = name or type(obj).__name__
    root = _core.rank() == root_rank
    payload = np.frombuffer(pickle.dumps(obj), np.uint8) if root else None
    length = _numpy_ops.broadcast(np.array([0 if payload is None else payload.size], np.int64),
                                  root_rank, name=name + ".sz")
    if not root:
        payload = np.empty(int(length[0]), np.uint8)
    data = _numpy_ops.broadcast(payload, root_rank, name=name + ".t")
    return obj if root else pickle.loads(data.tobytes())


class State:
    """The base of an elastic job's state. `bcast_object(obj)` broadcasts from rank 0
    (default: kolo's NumPy broadcast_object), `get_rank()` is this rank (kolo's)."""

    def __init__(self, bcast_object=None, get_rank=None):
        self._bcast_object = bcast_object or broadcast_object
        self._rank = get_rank or _core.rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions to call after each re-forming (e.g. to rescale the learning
        rate with the new size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state, then checks for host changes (may raise
        HostsUpdatedInterrupt). Commits copy the state: commit every few batches."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank at once when the driver says
        the hosts changed since this generation formed. Collective (a broadcast)
        in an elastic job; outside one, nothing to check and no collective."""
        job = _job.current()
        if not job.elastic:
            return
        mine = job.hosts_updated() if self._rank() == 0 else (False, 0)
        updated, result = self._bcast_object(mine)
        if updated:
            raise HostsUpdatedInterrupt(result == UPDATE_REMOVED)

    def save(self):
        """Saves the state in host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last saved state, undoing changes since."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's state rank 0's."""
        raise NotImplementedError()

    def reset(self):
        """Called after re-forming, before the callbacks and the sync."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and kept as
    attributes: ObjectState(epoch=0, batch=0).epoch."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        self._bcast_object = bcast_object or broadcast_object
        self._saved_state = copy.deepcopy(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr))
                             for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))
