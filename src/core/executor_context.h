// The executor's shared pieces (executor.h): what the shell hands a family of
// collectives (a Batch), what a family is (Family), and what every family uses
// to plan, launch and finish its own (ExecutionContext: the world's shape, the
// selector, the fusion buffer, outputs, the carried parts of the cycle, and the
// scratch reused so that a warm bucket allocates nothing).
// Coordinator thread only, like the executor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/fusion_buffer.h"
#include "core/fusion_planner.h"
#include "core/output_pool.h"
#include "core/pending.h"
#include "core/request.h"
#include "core/tensor_queue.h"
#include "transport/carrier.h"
#include "transport/selector.h"

namespace kolo::core {

// One planned bucket as the shell hands it to a family: this rank's entries in
// plan order with their responses. Reused from bucket to bucket (its vectors
// keep their storage).
struct Batch {
  std::vector<TensorEntry*> entries;
  std::vector<const Response*> responses;  // responses[i] is entries[i]'s
  std::vector<const std::string*> names;   // the entries' names, into the responses
  const TensorParams* params = nullptr;    // the bucket's first response's: its fusion class
  size_t planned_bytes = 0;                // the planner's size of the bucket (PlannedBucket::bytes)
  size_t bytes = 0;                        // the entries' bytes, for the timeline

  void clear() {
    entries.clear();
    responses.clear();
    names.clear();
    params = nullptr;
    planned_bytes = bytes = 0;
  }
};

// A family of collectives: plans, starts and finishes its own batches. The shell
// (Executor) calls start() once per batch, then, for host work, next() after
// each step's Work has ended, until no Work is left; it is the one that waits
// (Note [One execution model] in executor.h). Called in the same order with the
// same batches on every rank.
class Family {
 public:
  virtual ~Family() = default;

  // Starts `batch`. *work: the Work the shell waits for (host) or keeps in
  // flight (device); null when nothing is left to wait for (no data, or finished
  // from carried parts). An error fails the batch's entries.
  virtual Status start(Batch& batch, std::unique_ptr<transport::Work>* work) = 0;

  // Host work of several steps (a fused operation's copies out, a group's next
  // member): finishes the step whose Work just ended and starts the next one
  // (*work, left null when there is none).
  virtual Status next(Batch& batch, std::unique_ptr<transport::Work>* work) { return Status::OK(); }

  // Note [Data rides with the AND] (negotiator.h): writes this rank's part of
  // `response`, a collective alone whose entry is this rank's host tensor, at
  // `slot` (its data at most `limit` bytes, all of it at most `capacity`), and
  // returns true; false where it does not ride.
  virtual bool pack(const Response& response, const TensorEntry& entry, char* slot, size_t limit,
                    size_t capacity) {
    return false;
  }
};

struct ExecutionContext {
  ExecutionContext(transport::Selector& selector, FusionBuffer& fusion, int rank, int world_size,
                   transport::DeviceSupport* device_support, const transport::Carrier* carrier,
                   transport::HostMemory host_outputs)
      : selector(selector),
        fusion(fusion),
        rank(rank),
        world_size(world_size),
        device_support(device_support),
        carrier(carrier),
        threshold(fusion.size()),
        outputs_(std::make_shared<OutputPool>(host_outputs)) {}

  // What this collective's view starts from: the entry's buffers and device.
  transport::CollectiveView view_of(const TensorEntry& entry) const;
  // The handle-owned output of an allgather or alltoall (host: from the pool).
  Status allocate_output(TensorEntry& entry, size_t bytes);
  // Sets the device's index for a device tensor (an error without device support).
  Status resolve(Device* device) const;
  // The one way a collective reaches a transport: `view` gets the sequence number,
  // the selector picks the transport, and the transport starts it (*work) — or,
  // in a cycle that carried and where the transport carries, the carrier
  // finishes it from the carried parts now (*work stays null).
  Status start_on_transport(Collective op, transport::CollectiveView view,
                            std::unique_ptr<transport::Work>* work);

  transport::Selector& selector;
  FusionBuffer& fusion;
  const int rank;
  const int world_size;
  transport::DeviceSupport* const device_support;  // null: the world takes no device tensors
  // Note [Data rides with the AND]: the carrying transport's arithmetic (the
  // selector's); null where no offered transport carries, and nothing rides.
  const transport::Carrier* const carrier;

  size_t threshold;                    // the fusion threshold, <= fusion.size()
  size_t alone_bytes = size_t{1} << 20;  // the large-tensor cut-off
  size_t carry_bytes = 0;              // KOLO_AND_CARRY_BYTES

  // The operation being launched: its sequence number and, for the timeline, the
  // transport that took it (set by whoever starts it; the shell resets both).
  uint64_t sequence = 0;
  const char* transport_name = "none";
  bool deterministic = false;  // the bucket was reduced in rank order (the timeline says so)
  // execute()'s carried parts while it runs (carried[r]: rank r's); null otherwise.
  const std::vector<const char*>* carried = nullptr;
  // AllreduceFamily::pack_bucket packed this cycle's list: `plan` and the
  // family's bucket are that list's, and a cycle that carried reuses them
  // (Note [A carried bucket is planned once] in executor_allreduce.h).
  bool packed = false;

  // The planner's output and scratch, kept for their storage.
  std::vector<PlannedBucket> plan;
  PlanScratch plan_scratch;

 private:
  std::shared_ptr<OutputPool> outputs_;
};

// Note [Grouped collectives]
// A group (kolo_grouped_*_async) is one name in negotiation — its members are
// ready on every rank together or not at all, and a mismatch in any member fails
// the whole group on every rank — and one entry here. A grouped allreduce is one
// bucket (never split, never mixed). A grouped allgather in host memory that
// fits is one packed allgather (Note [Fused allgather and broadcast] in
// executor_gather.h); otherwise a grouped allgather or reducescatter runs as one
// transport call per member, in member order, within the group's slot of the
// cycle: the same transports and the same results as the members alone, with no
// other tensor between them. Host members run one after another, each after the
// last has ended (transports reuse their scratch: the shell waits between them,
// start_members() below); device members queue in order on the transport's
// stream and end as one Work.

// Starts a group's members from *member on (Note [Grouped collectives]): in host
// memory the next one that has data, leaving *member after it; on a device every
// one left, as one Work. start_member(m, &work) starts member m, leaving work
// null when it has nothing to move.
template <typename StartMember>
Status start_members(DeviceKind where, size_t members, size_t* member, StartMember&& start_member,
                     std::unique_ptr<transport::Work>* work);

// The members' device Work as one: complete when every part is.
std::unique_ptr<transport::Work> group_work(std::vector<std::unique_ptr<transport::Work>> parts);

template <typename StartMember>
Status start_members(DeviceKind where, size_t members, size_t* member, StartMember&& start_member,
                     std::unique_ptr<transport::Work>* work) {
  if (where == DeviceKind::kCpu) {
    while (*member < members && *work == nullptr) KOLO_RETURN_IF_ERROR(start_member((*member)++, work));
    return Status::OK();
  }
  std::vector<std::unique_ptr<transport::Work>> parts;
  while (*member < members) {
    std::unique_ptr<transport::Work> part;
    KOLO_RETURN_IF_ERROR(start_member((*member)++, &part));
    if (part != nullptr) parts.push_back(std::move(part));
  }
  if (!parts.empty()) *work = group_work(std::move(parts));
  return Status::OK();
}

}  // namespace kolo::core
