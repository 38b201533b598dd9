// Carrier: the arithmetic of an operation whose data rode with the negotiation's
// AND (Note [Data rides with the AND] in core/negotiator.h). Before the AND each
// rank packs its part of the one operation the cycle will make ready into the
// control plane's carry slot; after an AND that carried, each rank finishes the
// operation from every rank's part, with no second rendezvous.
//
// A transport whose capabilities say `carries` hands out its Carrier
// (Transport::carrier()), which computes what its own engine would (the same
// order of reductions, so the same bits): the node layer's is ShmCarrier
// (transports/shm/carrier.h). The executor packs and finishes through the
// selector's carrier, and only where the transport chosen for the operation is
// the one that carrier belongs to.
//
// Contract: coordinator thread only. Every rank packs the same operation (the
// same bucket or view, but for its own buffers) and finishes it from the same
// carried parts; pack and finish see the same descriptions a transport's
// allreduce() and collective() would. The slot and the carried parts belong to
// the control plane: a slot is written only by pack, the parts are read only
// during finish. Nothing here fails: a pack that cannot carry answers false
// (before writing what a peer would read), and then nothing rides.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/transport.h"

namespace kolo::transport {

class Carrier {
 public:
  virtual ~Carrier() = default;

  // What the timeline shows as the transport of an operation finished from
  // carried parts.
  virtual const char* name() const = 0;

  // Whether `bucket` can ride in `limit` bytes (its reduction element-wise, its
  // data no larger).
  virtual bool fits(const Bucket& bucket, size_t limit) const = 0;
  // This rank's part of `bucket` (fits() said so), written at `slot`.
  virtual void pack(const Bucket& bucket, char* slot) const = 0;
  // This rank's part of one collective, written at `slot`, whose data must fit in
  // `limit` bytes and whole part in `capacity`; false where it does not (or the
  // collective does not ride). `part` is the collective as this rank knows it
  // before the AND: its input and dtype, and for a broadcast count and root, an
  // allgather this rank's count, an alltoall send_counts, a reducescatter count
  // (its input's elements) and reduction.
  virtual bool pack(Collective op, const CollectiveView& part, char* slot, size_t limit,
                    size_t capacity) const = 0;

  // The bucket's outputs from every rank's part: carried[r] is rank r's slot.
  virtual void finish(const Bucket& bucket, const std::vector<const char*>& carried) const = 0;
  // The collective's output, `view` as collective() would receive it.
  virtual void finish(Collective op, const CollectiveView& view,
                      const std::vector<const char*>& carried) const = 0;
};

}  // namespace kolo::transport
