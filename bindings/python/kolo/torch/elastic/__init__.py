"""kolo.torch.elastic: horovod.torch.elastic over kolo, for programs started by
``kolorun --elastic`` (Horovod's elastic examples run with ``import kolo.torch as
hvd``): run, TorchState, ElasticSampler, and the State classes of kolo.elastic.

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        ...

Re-forming is kolo.elastic's (Note [The re-forming seam] in kolo/elastic/_world.py).
"""

from ...elastic import ObjectState, State
from ...elastic._run import run
from .sampler import ElasticSampler
from .state import TorchState

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]
