"""ElasticSampler: Horovod's (horovod/torch/elastic/sampler.py), over kolo's rank
and size.

Like DistributedSampler, each rank takes every size-th index of the epoch's
(shuffled, seed + epoch) order, padded to a multiple of the size; and it records
how many samples the job has processed this epoch (record_batch), so that after
re-forming, the remaining ones are split over the new ranks (reset, called when
TorchState syncs it). set_epoch() at the end of an epoch starts the next.
"""

import math
import random

import torch.utils.data

from ... import _core


class ElasticSampler(torch.utils.data.Sampler):
    """Samples `dataset` (of constant length) for this rank; shuffle with `seed`
    (the same on every rank)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts `epoch` with nothing processed. Call it at the end of an epoch, so
        that a failure in the middle of one does not process samples twice."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Every rank processed `batch_size` more samples."""
        self.processed_num += batch_size * self.num_replicas

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def reset(self):
        """Splits this epoch's unprocessed indices over the current ranks."""
        self.num_replicas = _core.size()
        self.rank = _core.rank()
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        self.remaining_indices = indices[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        self.indices = self.remaining_indices[:]
        self.indices += self.indices[:(self.total_size - len(self.indices))]
        assert len(self.indices) == self.total_size
        self.indices = self.indices[self.rank:self.total_size:self.num_replicas]
        assert len(self.indices) == self.num_samples
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
