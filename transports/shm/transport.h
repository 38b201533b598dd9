// The "shm" transport: the node layer's engines (allreduce.h, collectives.h)
// behind the Transport seam, offered by a world whose ranks are all on one node;
// and the pieces "hierarchical" (transports/hierarchical) shares with it.
//
// Contract (see transport/transport.h): the engines' — coordinator thread only,
// the same order on every rank, CPU memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/status.h"
#include "transport/reduction.h"
#include "transport/transport.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/carrier.h"
#include "transports/shm/collectives.h"

namespace kolo::shm {

// ShmAllreduce for allreduce; the other collectives go to `collectives` (null:
// none, the Transport defaults answer).
class ShmTransport : public transport::Transport {
 public:
  explicit ShmTransport(std::unique_ptr<ShmAllreduce> engine);
  ShmTransport(std::unique_ptr<ShmAllreduce> engine, std::unique_ptr<ShmCollectives> collectives);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    c.reach = transport::Reach::kOneNode;
    c.carries = true;
    c.chunk = transport::Chunk::kNodeSlice;
    c.deterministic = true;  // ShmAllreduce::run's in_rank_order
    return c;
  }
  const transport::Carrier* carrier() const override { return &carrier_; }
  Status supports(const transport::Bucket& bucket) const override;
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override;
  void tune(const transport::Tuning& tuning) override {
    if (tuning.slice_bytes > 0) engine_->set_slice_bytes(tuning.slice_bytes);
  }
  Status supports_collective(Collective op,
                             const transport::CollectiveView& view) const override;
  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& view) override;

  // The engines, for a transport composed over this one ("hierarchical", which
  // runs its intra-node steps on them). Coordinator thread, as every call.
  ShmAllreduce& allreduce_engine() { return *engine_; }
  ShmCollectives* collectives_engine() { return collectives_.get(); }

 private:
  std::unique_ptr<ShmAllreduce> engine_;
  std::unique_ptr<ShmCollectives> collectives_;
  ShmCarrier carrier_;
};

// What shm and hierarchical accept: CPU memory.
Status shm_supports(const char* name, const transport::Bucket& bucket);

// `before` (may be empty), then the reduction's output factor or integer division
// applied to a reduced shard in place: what a node's ranks copy out is final.
// Per element when `before` is empty.
ShmAllreduce::ShardStage finish_stage(const transport::Reduction& r, DataType dtype,
                                      std::function<Status(void*, int64_t)> before);

}  // namespace kolo::shm
