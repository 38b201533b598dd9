"""Slots: which rank runs where, and the environment each worker gets.

assign_slots() is Horovod's rank assignment (horovod.runner.common.util.hosts.
get_host_assignments), which an elastic job applies to every generation:

    hosts in order, each host's slots in order:   a:2        b:2        c:1
    rank                                          0  1       2  3       4
    local rank (the slot's index on its host)     0  1       0  1       0
    cross rank (index among the hosts that have   0  0       1  1       2
      a slot of this local rank), cross size      3  2       3  2       3

so ranks stay in blocks per host, and a host keeps its place in the order for as
long as it is in the job (discovery.py keeps the order): survivors keep their rank
unless a host before theirs left. Pure functions, tested one by one.
"""

import collections

from . import names

Slot = collections.namedtuple("Slot", [
    "host", "rank", "local_rank", "cross_rank", "size", "local_size", "cross_size",
    "group_rank", "group_size"])
Slot.key = property(lambda s: "%s:%d" % (s.host, s.local_rank))
Slot.key.__doc__ = "host:local_rank, the worker's identity across generations (Horovod's)"


def assign_slots(hosts, max_np=None):
    """[(host, slots)] in order -> [Slot] in rank order, at most max_np of them."""
    placed, cross = [], collections.defaultdict(list)
    rank = 0
    for host, slots in hosts:
        ranks = []
        for local_rank in range(slots):
            if max_np is not None and rank == max_np:
                break
            ranks.append(rank)
            cross[local_rank].append(host)
            rank += 1
        if ranks:
            placed.append((host, ranks))
    out = []
    for group_rank, (host, ranks) in enumerate(placed):
        for local_rank, r in enumerate(ranks):
            out.append(Slot(host, r, local_rank, cross[local_rank].index(host), rank,
                            len(ranks), len(cross[local_rank]), group_rank, len(placed)))
    return out


def slot_env(slot):
    """The variables that say where this worker is: torchrun's and horovodrun's."""
    return {
        names.RANK: str(slot.rank),
        names.WORLD_SIZE: str(slot.size),
        names.LOCAL_RANK: str(slot.local_rank),
        names.LOCAL_WORLD_SIZE: str(slot.local_size),
        names.GROUP_RANK: str(slot.group_rank),
        names.GROUP_WORLD_SIZE: str(slot.group_size),
        names.ROLE_RANK: str(slot.rank),
        names.ROLE_WORLD_SIZE: str(slot.size),
        names.ROLE_NAME: names.ROLE,
        names.HOROVOD_HOSTNAME: slot.host,
        names.HOROVOD_RANK: str(slot.rank),
        names.HOROVOD_SIZE: str(slot.size),
        names.HOROVOD_LOCAL_RANK: str(slot.local_rank),
        names.HOROVOD_LOCAL_SIZE: str(slot.local_size),
        names.HOROVOD_CROSS_RANK: str(slot.cross_rank),
        names.HOROVOD_CROSS_SIZE: str(slot.cross_size),
    }


def world_env(token, master_addr, master_port, store_port, generation):
    """The variables every worker of one generation shares: the socket world's."""
    return {
        names.KOLO_WORLD: names.SOCKET_WORLD,
        names.KOLO_JOB_TOKEN: token,
        names.MASTER_ADDR: master_addr,
        names.MASTER_PORT: str(master_port),
        names.KOLO_STORE_PORT: str(store_port),
        names.KOLO_GENERATION: str(generation),
    }


def slot_json(slot):
    """A Slot as the elastic protocol sends it (kolo/elastic/_driver.py reads it)."""
    return dict(slot._asdict())
