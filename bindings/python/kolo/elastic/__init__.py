"""kolo.elastic: Horovod's elastic API (horovod.common.elastic) over kolo, for
jobs started by ``kolorun --elastic``: a training loop that keeps going when
workers fail or hosts come and go.

    import kolo
    import kolo.elastic

    kolo.init()
    state = kolo.elastic.ObjectState(epoch=0)

    @kolo.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, 10):
            ...                      # collectives; a failure re-forms the world
            state.commit()

    train(state)

PyTorch programs use ``kolo.torch.elastic`` (TorchState, ElasticSampler), as
``horovod.torch.elastic``. See _run.py for run(), _state.py for the states, and
_world.py for what re-forming needs from kolo's C API (Note [The re-forming seam]).
"""

from ..exceptions import HorovodInternalError, HostsUpdatedInterrupt
from ._driver import ElasticDriverError
from ._run import run
from ._state import ObjectState, State, broadcast_object

__all__ = ["ElasticDriverError", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState",
           "State", "broadcast_object", "run"]
