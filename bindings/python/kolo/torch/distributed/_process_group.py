"""ProcessGroupKolo: torch.distributed's collectives (c10d) over kolo's C API.

Contract: c10d calls these methods (from Python through torch.distributed's API,
or from C++ through c10d's PyProcessGroup trampoline: DDP's reducer, the
parameter broadcast) on CPU tensors, on any thread. Each method starts its kolo
operation(s) before it returns and returns a Work whose future completes when
kolo has completed them (_completion.py; _work.py says which Work). Results are
written into the caller's tensors, as c10d expects. An error - refused at once,
or from the collective on every rank - is a RuntimeError that carries kolo's
message and names this rank's c10d call: the op, its tensors' dtypes and shapes,
the group and the call's position.

Which kolo call serves each c10d call (_kolo_calls.py; "set": the group's set):
  allreduce SUM/AVG/MIN/MAX/PRODUCT   kolo_allreduce_async_ex in place (several
                                      tensors: kolo_grouped_allreduce_async_ex)
  allreduce BAND/BOR/BXOR             kolo_allgather_async_ex of one row a rank,
                                      reduced here (integer and bool tensors)
  allreduce PREMUL_SUM                refused: torch 1.13 shows Python no factor
  allreduce_coalesced                 kolo_grouped_allreduce_async_ex
  reduce                              kolo_grouped_allreduce_async_ex (a group of
                                      one) into a scratch tensor; the root copies
  broadcast                           kolo_broadcast_async_ex, root as a global rank
  allgather, _allgather_base          kolo_allgather_async_ex, one row a rank;
                                      _allgather_base of host tensors into a
                                      contiguous output of their dtype:
                                      kolo_allgather_into_async_ex
  allgather_coalesced, gather         kolo_grouped_allgather_async (gather: the
                                      root copies the rows out)
  reduce_scatter, _reduce_scatter_base  SUM/AVG: kolo_reducescatter_async_ex of
                                      one row a rank; MIN/MAX/PRODUCT: allreduce
                                      of every row, this rank's kept; bitwise: as
                                      allreduce
  alltoall_base (all_to_all_single)   kolo_alltoall_async_ex with the send splits
  alltoall (lists)                    kolo_alltoall_async_ex of the flattened
                                      tensors, an element a row
  scatter                             kolo_alltoall_async_ex: the root sends a row
                                      to each rank, the others send none
  barrier                             kolo_allreduce_async_ex of one int32
  send, recv                          kolo_broadcast_async_ex rooted at the sender
                                      in the pair's set (_groups.py, Note [Send
                                      and recv over pair sets])
  recv_anysource                      refused: needs a wildcard receive

Note [Sequence names]
c10d's calls carry no names, and kolo negotiates by name. Every call of a group
is named "c10d.<group serial>.<position>": the same on every rank as long as the
ranks make the same calls in the same order, as c10d requires. So if a rank makes
a different call at some position (another collective, or another shape or
dtype), its kolo operation meets the other ranks' under one name and kolo fails
it on every rank with a mismatch naming each rank's value - never a hang. Where
two c10d calls would map to the same kolo collective with the same shapes, the
one that is a c10d reduce or gather uses kolo's grouped form, so that it, too,
differs from an all_reduce or all_gather in the collective kolo compares.

Note [A failure C++ cannot see]
A C++ caller that only waits on its Work (DDP's parameter broadcast at
construction) cannot see the collective's error in torch 1.13 (_work.py, Note
[Two kinds of Work]). So when a call made from C++ fails, the group is marked
failed and every later call on it raises a RuntimeError carrying that error: a
rank whose DDP construction went on after a failed broadcast fails at its next
collective on the group instead of computing on wrong parameters.
"""

import functools
import threading

import torch
from torch._C._distributed_c10d import ProcessGroup, ReduceOp

from ..._core import Average, Max, Min, Product, Sum
from ...exceptions import UnsupportedError
from . import _kolo_calls as calls
from ._completion import watch
from ._groups import add_pairs, start_world, take_next
from ._work import for_python, make_work

_RED = ReduceOp.RedOpType
_KOLO_OPS = {_RED.SUM: Sum, _RED.AVG: Average, _RED.MIN: Min, _RED.MAX: Max,
             _RED.PRODUCT: Product}
_BITWISE = {_RED.BAND: torch.bitwise_and, _RED.BOR: torch.bitwise_or,
            _RED.BXOR: torch.bitwise_xor}


def _red_op(opts):
    return _RED.SUM if opts is None else opts.reduceOp.op


class _What:
    """What a call is, for its error messages: "kolo backend: <op> of <tensors>
    (group <g>, call <n>)", formatted only when a message needs it (every call
    makes one)."""

    __slots__ = ("op_name", "tensors", "serial", "seq")

    def __init__(self, op_name, tensors, serial, seq):
        self.op_name, self.tensors, self.serial, self.seq = op_name, tensors, serial, seq

    def __str__(self):
        return "kolo backend: %s of %s (group %d, call %d)" % (
            self.op_name, _describe(self.tensors), self.serial, self.seq)


def _describe(tensors):
    """"float32[4, 4], ..." for a (nested) list of tensors."""
    out = []
    for t in tensors:
        if isinstance(t, torch.Tensor):
            out.append("%s%s" % (str(t.dtype).replace("torch.", ""), list(t.shape)))
        elif isinstance(t, (list, tuple)):
            out.append("[%s]" % _describe(t))
    return ", ".join(out) or "no tensors"


def _contiguous(t):
    return t if t.is_contiguous() else t.contiguous()


def _copy_back(pairs):
    for t, buf in pairs:
        if buf is not t:
            t.copy_(buf)


def _one_row(t):
    """t as one row, for an allgather; a tensor without elements as no row (kolo
    takes no rows of zero elements)."""
    if t.numel() == 0:
        return t.new_empty((0, 1))
    return t.reshape((1,) + tuple(t.shape)).contiguous()


def _check_bitwise(t, op):
    if t.is_floating_point() or t.is_complex():
        raise UnsupportedError("%s takes integer or bool tensors, not %s" % (op.name, t.dtype))


class ProcessGroupKolo(ProcessGroup):
    """One c10d group on a kolo process set; see the module comment."""

    def __init__(self, rank, size, info, timeout):
        super().__init__(rank, size)
        self._info = info
        self._timeout = timeout
        self._seq = 0
        self._lock = threading.Lock()
        self._failed = None  # Note [A failure C++ cannot see]
        self._p2p_counts = {}  # (global src, global dst, tag) -> messages so far

    def getBackendName(self):
        return "kolo"

    # ---- plumbing ------------------------------------------------------------------

    def _start(self, op_name, tensors, start):
        """Runs start(name) -> (kolo handles, finish) under the call's sequence name
        (Note [Sequence names]) and returns the Work."""
        python = for_python(2)
        if self._failed is not None:
            raise RuntimeError("kolo backend: %s: this group failed in an earlier call whose "
                               "caller (C++) could not be told: %s" % (op_name, self._failed))
        with self._lock:
            seq = self._seq
            self._seq += 1
            name = "c10d.%d.%d" % (self._info.serial, seq)
            what = _What(op_name, tensors, self._info.serial, seq)
            return self._launch(what, name, start, python)

    def _launch(self, what, name, start, python):
        try:
            handles, finish = start(name)
        except Exception as e:  # noqa: BLE001 - c10d callers expect RuntimeError
            raise RuntimeError("%s: %s" % (what, e)) from e
        on_error = None if python else self._fail
        return make_work(watch(handles, finish, what, on_error), python)

    def _fail(self, error):
        self._failed = error

    @property
    def _ps(self):
        return self._info.set_id

    def _gather_rows(self, src, name):
        """Handle of the allgather of src as one row per rank: [size, *src.shape]."""
        return calls.allgather(_one_row(src), name, self._ps, self.size())

    def _bitwise(self, src, op, name):
        """(handle, reduced()) for a bitwise op kolo lacks: an allgather, then the
        reduction over the ranks' rows here."""
        _check_bitwise(src, op)
        h = self._gather_rows(src, name)

        def reduced():
            return functools.reduce(_BITWISE[op], h.wait()[0].unbind(0))
        return h, reduced

    def _kolo_op(self, op):
        if op in _KOLO_OPS:
            return _KOLO_OPS[op]
        if op == _RED.PREMUL_SUM:
            raise UnsupportedError("PREMUL_SUM: torch 1.13 keeps its factor in C++ and shows "
                                   "it no Python backend")
        raise UnsupportedError("reduce op %s is not supported" % op.name)

    # ---- reductions ----------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        op = _red_op(opts)

        def start(name):
            if op in _BITWISE:
                h, reduced = self._bitwise(tensors[0], op, name)
                return [h], lambda: [tensors[0].copy_(reduced())] and tensors
            kop = self._kolo_op(op)
            bufs = [_contiguous(t) for t in tensors]
            if len(bufs) == 1:
                h = calls.allreduce(bufs[0], bufs[0], name, kop, self._ps)
            else:
                h = calls.grouped_allreduce(bufs, bufs, name, kop, self._ps)
            return [h], lambda: _copy_back(zip(tensors, bufs)) or tensors
        return self._start("all_reduce", tensors, start)

    def allreduce_coalesced(self, tensors, opts=None):
        op = _red_op(opts)

        def start(name):
            bufs = [_contiguous(t) for t in tensors]
            h = calls.grouped_allreduce(bufs, bufs, name, self._kolo_op(op), self._ps)
            return [h], lambda: _copy_back(zip(tensors, bufs)) or tensors
        return self._start("all_reduce_coalesced", tensors, start)

    def reduce(self, tensors, opts=None):
        op, root, t = _red_op(opts), opts.rootRank, tensors[0]

        def start(name):
            if op in _BITWISE:
                h, reduced = self._bitwise(t, op, name)
            else:
                src = _contiguous(t)
                out = torch.empty_like(src)
                h = calls.grouped_allreduce([src], [out], name, self._kolo_op(op), self._ps)
                reduced = lambda: out  # noqa: E731

            def finish():
                if self.rank() == root:
                    t.copy_(reduced())
                return tensors
            return [h], finish
        return self._start("reduce", tensors, start)

    def _reduce_scatter_rows(self, out, src, op, name):
        """(handles, finish) leaving row `rank` of the reduction of src (one row per
        rank) in out."""
        rank = self.rank()
        if op in (_RED.SUM, _RED.AVG):
            buf = _contiguous(out)
            h = calls.reducescatter(src, buf.view((1,) + tuple(out.shape)), name,
                                    _KOLO_OPS[op], self._ps)
            return [h], lambda: _copy_back([(out, buf)]) or [out]
        if op in _BITWISE:
            h, reduced = self._bitwise(src, op, name)
            return [h], lambda: [out.copy_(reduced()[rank])]
        full = torch.empty_like(src)
        h = calls.allreduce(src, full, name, self._kolo_op(op), self._ps)
        return [h], lambda: [out.copy_(full[rank])]

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out, ins = output_tensors[0], input_tensors[0]

        def start(name):
            if len(ins) != self.size():
                raise ValueError("%d inputs for %d ranks" % (len(ins), self.size()))
            src = torch.stack([i.reshape(out.shape) for i in ins]).contiguous()
            return self._reduce_scatter_rows(out, src, _red_op(opts), name)
        return self._start("reduce_scatter", [output_tensors, input_tensors], start)

    def _reduce_scatter_base(self, output, input, opts=None):
        def start(name):
            if input.numel() != output.numel() * self.size():
                raise ValueError("the input has %d elements, not size %d times the output's %d"
                                 % (input.numel(), self.size(), output.numel()))
            src = input.reshape((self.size(),) + tuple(output.shape)).contiguous()
            return self._reduce_scatter_rows(output, src, _red_op(opts), name)
        return self._start("reduce_scatter_tensor", [output, input], start)

    # ---- data movement -------------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        root = self._info.global_ranks[opts.rootRank if opts is not None else 0]

        def start(name):
            bufs = [_contiguous(t) for t in tensors]
            hs = [calls.broadcast(b, root, name if i == 0 else "%s.%d" % (name, i), self._ps)
                  for i, b in enumerate(bufs)]
            return hs, lambda: _copy_back(zip(tensors, bufs)) or tensors
        return self._start("broadcast", tensors, start)

    def allgather(self, output_tensors, input_tensors, opts=None):
        outs, t = output_tensors[0], input_tensors[0]

        def start(name):
            if len(outs) != self.size():
                raise ValueError("%d outputs for %d ranks" % (len(outs), self.size()))

            def copy_rows(rows, splits):  # straight from kolo's output
                if t.numel():
                    for o, row in zip(outs, rows.unbind(0)):
                        o.copy_(row.reshape(o.shape))
                return output_tensors
            h = calls.allgather(_one_row(t), name, self._ps, self.size(), use=copy_rows)
            return [h], h.wait
        return self._start("all_gather", [output_tensors, input_tensors], start)

    def _allgather_base(self, output, input, opts=None):
        def start(name):
            if output.numel() != input.numel() * self.size():
                raise ValueError("the output has %d elements, not size %d times the input's %d"
                                 % (output.numel(), self.size(), input.numel()))
            if (input.numel() and input.device.type == "cpu" and output.is_contiguous()
                    and output.dtype == input.dtype and output.device == input.device):
                # Straight into the output (kolo_allgather_into_async).
                h = calls.allgather_into(_one_row(input), output, name, self._ps)
                return [h], lambda: [h.wait()]
            h = self._gather_rows(input, name)
            return [h], lambda: [output.copy_(h.wait()[0].reshape(output.shape))]
        return self._start("all_gather_into_tensor", [output, input], start)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        def start(name):
            h = calls.grouped_allgather([_one_row(t) for t in input_list], name, self._ps,
                                        self.size())

            def finish():
                for i, gathered in enumerate(h.wait()):
                    for r in range(self.size() if input_list[i].numel() else 0):
                        output_lists[r][i].copy_(gathered[r].reshape(output_lists[r][i].shape))
                return output_lists
            return [h], finish
        return self._start("all_gather_coalesced", [output_lists, input_list], start)

    def gather(self, output_tensors, input_tensors, opts=None):
        root, t = opts.rootRank, input_tensors[0]

        def start(name):
            h = calls.grouped_allgather([_one_row(t)], name, self._ps, self.size())

            def finish():
                if self.rank() == root and t.numel():
                    for o, row in zip(output_tensors[0], h.wait()[0].unbind(0)):
                        o.copy_(row.reshape(o.shape))
                return output_tensors
            return [h], finish
        return self._start("gather", [output_tensors, input_tensors], start)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root, out = opts.rootRank, output_tensors[0]

        def start(name):
            n = self.size()
            if self.rank() == root:
                src = torch.stack([i.reshape(out.shape) for i in input_tensors[0]]).contiguous()
                splits = [1] * n
            else:
                src = out.new_empty((0,) + tuple(out.shape))
                splits = [0] * n
            h = calls.alltoall(src, splits, name, self._ps, n)
            return [h], lambda: [out.copy_(h.wait()[0].reshape(out.shape))]
        return self._start("scatter", [output_tensors, input_tensors], start)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        def start(name):
            n = self.size()

            def fill(received, splits):  # straight from kolo's output
                want = list(output_split_sizes) or [output.shape[0] // n] * n
                if splits.tolist() != want or received.numel() != output.numel():
                    raise ValueError("received rows %s (%d elements) do not fit output_split_sizes"
                                     " %s and the output %s" % (splits.tolist(), received.numel(),
                                                                want, list(output.shape)))
                output.copy_(received.reshape(output.shape))
                return [output]
            h = calls.alltoall(input.contiguous(), list(input_split_sizes) or None, name,
                               self._ps, n, use=fill)
            return [h], h.wait
        return self._start("all_to_all_single", [output, input], start)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        def start(name):
            flats = [t.reshape(-1) for t in input_tensors]
            src = torch.cat(flats) if flats else torch.empty(0)

            def fill(received, splits):  # straight from kolo's output
                offset = 0
                for o, rows in zip(output_tensors, splits.tolist()):
                    if rows != o.numel():
                        raise ValueError("received %d elements for an output of %s" % (
                            rows, list(o.shape)))
                    o.copy_(received[offset:offset + rows].reshape(o.shape))
                    offset += rows
                return output_tensors
            h = calls.alltoall(src, [f.numel() for f in flats], name, self._ps, self.size(),
                               use=fill)
            return [h], h.wait
        return self._start("all_to_all", [output_tensors, input_tensors], start)

    def barrier(self, opts=None):
        def start(name):
            token = torch.zeros(1, dtype=torch.int32)
            return [calls.allreduce(token, token, name, Sum, self._ps)], lambda: []
        return self._start("barrier", [], start)

    # ---- point to point ------------------------------------------------------------

    def send(self, tensors, dst, tag=0):
        return self._p2p("send", tensors, self.rank(), dst, tag, for_python(1))

    def recv(self, tensors, src, tag=0):
        return self._p2p("recv", tensors, src, self.rank(), tag, for_python(1))

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError(
            "kolo backend: recv from any source needs point-to-point verbs with a wildcard "
            "source, which kolo's C API does not have (send and recv from a named rank "
            "work over pair sets)")

    def _p2p(self, op_name, tensors, src, dst, tag, python):
        """A send or recv: a broadcast rooted at the sender in the pair's kolo set
        (_groups.py, Note [Send and recv over pair sets]), named after the pair, the
        tag and how many messages with that tag went from src to dst before."""
        t = tensors[0]
        a, b = self._info.global_ranks[src], self._info.global_ranks[dst]
        pair = self._info.pairs.get((min(a, b), max(a, b)))
        if pair is None:
            raise RuntimeError(
                "kolo backend: %s: send/recv run over a kolo set for each pair of ranks, "
                "made only for groups of at most 8 ranks; this group has %d. Larger groups "
                "need kolo point-to-point verbs (kolo_send_async/kolo_recv_async: a buffer, "
                "a peer, a tag, a handle), which the C API does not have yet" % (
                    op_name, self.size()))
        with self._lock:
            key = (a, b, int(tag))
            count = self._p2p_counts.get(key, 0)
            self._p2p_counts[key] = count + 1
            name = "c10d.%d.p2p.%d.%d.%d.%d" % (self._info.serial, a, b, tag, count)
            what = "kolo backend: %s of %s from rank %d to rank %d (group %d, tag %d)" % (
                op_name, _describe(tensors), src, dst, self._info.serial, tag)

            def start(name):
                buf = _contiguous(t)
                h = calls.broadcast(buf, a, name, pair.process_set_id)
                return [h], lambda: _copy_back([(t, buf)]) or tensors
            return self._launch(what, name, start, python)


def create(store, rank, size, timeout):
    """The creator torch.distributed calls for a group of backend "kolo" (on its
    members only; _groups.install() prepared the group on every rank)."""
    info = take_next()
    if info.global_ranks is None:  # the default group: the world
        start_world(store, rank, size)
        info.global_ranks = list(range(size))
        add_pairs(info)
    elif info.process_set.rank() != rank:
        raise RuntimeError("kolo backend: c10d gave group rank %d, kolo's set has %d" % (
            rank, info.process_set.rank()))
    return ProcessGroupKolo(rank, size, info, timeout)
