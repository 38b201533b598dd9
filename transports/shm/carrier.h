// ShmCarrier: the shm engine's arithmetic for operations whose data rode with the
// node AND (transport/carrier.h, Note [Data rides with the AND] in
// core/negotiator.h): the "shm" transport's carrier, computed on the coordinator
// thread from the carried parts.
//
// What each part is (the part rank r writes at its slot):
//   bucket          every tensor's input, prescaled, one after another
//   broadcast       the root's input (other ranks write nothing)
//   allgather       this rank's input
//   alltoall        n int64 offsets, in elements, of this rank's block for each
//                   destination, then its input (so that a reader finds its block
//                   without the matrix)
//   reducescatter   this rank's input, prescaled
// and how finish() reads them, as the shm engine's one round does: a bucket's
// parts reduced in rank order, then the output factor; a reducescatter's own
// block first, then each peer's in rank order, then the output factor. The same
// kernels in the same order give the same bits.
//
// `rank` is this rank's local rank, as the engines index the node's ranks (the
// carry runs only where the world is one node). Coordinator thread only.
#pragma once

#include "transport/carrier.h"

namespace kolo::shm {

class ShmAllreduce;
class ShmCollectives;

// Note [Kolo memory does not ride]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bucket rides with the AND up to KOLO_AND_CARRY_BYTES (16 KiB by default):
// packed, read by every peer and reduced by each, where the engine would post it
// to a slot and hand shards back and forth. A bucket of one tensor that the shm
// allreduce would read in place from kolo memory (allreduce_in_place.cc) is
// faster there from its threshold, 8 KiB, up: at 2 ranks from kolo memory, 16
// KiB took 3.5-4.0 us in place against 4.9-5.3 us carried, in place or not, and
// 8 KiB 3.2-3.3 us against 3.4-3.7 (docs/perf/kolo-memory.md, "2026-11-29: the
// first slice's copy"). So fits() turns such a bucket away and the engine takes
// it. This rank decides alone: a carry counts only when every rank packed (Note
// [Data rides with the AND]), so one rank whose buffers are in kolo memory sends
// the bucket to the engine on every rank, which reads in place only if all are.
// Likewise a collective whose
// source lies in kolo memory and whose block reaches the size from which the
// peers read it mapped (Note [The peers' sources in kolo memory] in
// collectives_choices.cc): the engine reads it with one copy where the carry
// packs it, reads every part and copies out again: at 2 ranks an allgather of
// 16 KiB blocks took 3.1-3.2 us against 5.5-6.2 carried, and with the blocks
// read mapped from 8 KiB on (collectives.h) the allgather, alltoall and
// reducescatter of 16 KiB gained 14-31 % (docs/perf/kolo-memory.md, "2026-11-29:
// the first slice's copy").
class ShmCarrier : public transport::Carrier {
 public:
  // `engine`, `collectives`: the node's engines (either may be null: then
  // nothing of its kind is turned away).
  explicit ShmCarrier(int rank, const ShmAllreduce* engine = nullptr,
                      const ShmCollectives* collectives = nullptr)
      : rank_(rank), engine_(engine), collectives_(collectives) {}

  const char* name() const override { return "shm+and"; }
  bool fits(const transport::Bucket& bucket, size_t limit) const override;
  void pack(const transport::Bucket& bucket, char* slot) const override;
  bool pack(Collective op, const transport::CollectiveView& part, char* slot, size_t limit,
            size_t capacity) const override;
  void finish(const transport::Bucket& bucket,
              const std::vector<const char*>& carried) const override;
  void finish(Collective op, const transport::CollectiveView& view,
              const std::vector<const char*>& carried) const override;

 private:
  const int rank_;
  const ShmAllreduce* engine_;
  const ShmCollectives* collectives_;
};

}  // namespace kolo::shm
