// Executor: turns the negotiated, ordered responses of one cycle into transport
// work.
//
// For each cycle it fails the names whose response is an error, cuts the rest
// into buckets with the fusion planner (plan_cycle), describes each allreduce
// bucket the one way every transport receives it (transport::Bucket: its
// tensors, the decided Reduction, the staging buffer), and hands it to the
// selected transport; then the other buckets: fused allgathers and broadcasts
// (Note [Fused allgather and broadcast]) and every other collective alone. Every
// transport call returns Work, and every Work goes through launch(): see Note
// [One execution model].
// Coordinator thread only; runs identically on every rank.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/flight_recorder.h"
#include "core/fusion_buffer.h"
#include "core/fusion_planner.h"
#include "core/output_pool.h"
#include "core/pending.h"
#include "core/request.h"
#include "core/tensor_queue.h"
#include "core/timeline.h"
#include "transport/registry.h"

namespace kolo::core {

class Executor {
 public:
  // Completes one local tensor (the runtime forgets it and completes its handle).
  using Complete = std::function<void(TensorEntry&, Status)>;

  // `timeline` may be null (no timeline); `device` is null when the world takes no
  // device tensors.
  Executor(transport::Selector& selector, FusionBuffer& fusion, int rank, int world_size,
           Complete complete, Timeline* timeline, transport::DeviceSupport* device = nullptr);

  // `pending` maps this rank's in-flight names to their entries; every OK response
  // names an entry in it — except allreduces this rank takes part in after it
  // joined, for which it contributes zeros (Note [Join] in negotiator.h). Error
  // responses complete the entry if this rank has one. Allreduce buckets run
  // first, then the other buckets, each group of buckets in the order of their
  // first response; both orders are the same on every rank. Entries leave
  // `pending` when their work is launched.
  // `carried` (may be null): the cycle rode with the AND, and carried[r] is rank
  // r's packed bucket (Note [Data rides with the AND] in negotiator.h).
  void execute(const std::vector<Response>& responses, Pending* pending,
               const std::vector<const char*>* carried = nullptr);

  // executor_carry.cc, Note [Data rides with the AND]: before the AND, if
  // `ahead` (this rank's cached requests in bit order) is one host allreduce
  // bucket of at most min(capacity, the carry bytes) that the selector gives to
  // shm, writes its prescaled inputs at `slot` and returns true.
  bool pack_ahead(const std::vector<const Response*>& ahead,
                  Pending* pending, char* slot, size_t capacity);
  // KOLO_AND_CARRY_BYTES; every rank sets the same (0: nothing is packed).
  void set_carry_bytes(size_t bytes);

  // Device work in flight: completes what has finished, in launch order per test;
  // returns true if anything completed. Cheap when nothing is in flight.
  bool poll();
  bool busy() const { return !in_flight_.empty(); }
  // Where buckets record that their operations started executing; null: nowhere.
  void set_flight_recorder(FlightRecorder* flight) { flight_ = flight; }
  // Waits for everything in flight and completes it (shutdown).
  void finish_all();

  // The fusion threshold (at most the fusion buffer's size) and the large-tensor
  // cut-off (Note [Large tensors skip the fusion buffer]) from the next execute()
  // on. Every rank sets the same at the same cycle (the buckets depend on them).
  void set_sizes(size_t fusion_threshold, size_t large_tensor_bytes);
  // Bytes of allreduce buckets started so far (the autotuner's measure).
  uint64_t allreduced_bytes() const { return allreduced_bytes_; }

 private:
  struct InFlight {
    std::unique_ptr<transport::Work> work;
    std::vector<TensorEntry> entries;
  };
  // Every transport call ends here (Note [One execution model]): the entries
  // named in names_ complete with the Work's status — at once, in `pending`, for
  // host work; from poll() for device work, moved into in_flight_ — or with
  // `started` if it is an error. Either way they leave `pending`.
  void launch(Status started, std::unique_ptr<transport::Work> work, DeviceKind where,
              Pending* pending);
  // Completes every entry that has a handle with `status`.
  void complete_all(std::vector<TensorEntry>& entries, const Status& status);
  void retire(InFlight& done);

  // Entries for the allreduces this rank joined: zeros in, results dropped.
  Status add_zero_entries(const std::vector<const Response*>& joined,
                          Pending* pending);
  void run_allreduce(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                     Pending* pending);
  // The bucket of `entries` (all of one fusion class), as transport.h describes it.
  Status describe_bucket(const std::vector<TensorEntry*>& entries, const TensorParams& params,
                         transport::Bucket* bucket);
  std::unique_ptr<transport::Work> start_bucket(const std::vector<TensorEntry*>& entries,
                                                const TensorParams& params, Status* status);
  // executor_carry.cc: the bucket from the carried copies (carried_), settled.
  Status reduce_carried(const std::vector<TensorEntry*>& entries, const TensorParams& params);
  // executor_carry.cc: one collective's part, before the AND; the collective
  // from every rank's part, after it.
  bool pack_collective(const Response& response, Pending* pending,
                       char* slot, size_t limit, size_t capacity);
  void run_carried(transport::CollectiveOp op, const transport::CollectiveView& view);
  // Records the operation being launched (op_, the entries named in names_) in
  // the timeline and advances the sequence number; from launch().
  void record();

  // executor_fusion.cc: a bucket of anything but allreduces; a fused allgather
  // or broadcast (host memory), settled before they return.
  void run_collective(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                      Pending* pending);
  Status run_fused_allgather(const std::vector<const Response*>& responses);
  Status run_fused_broadcast(const std::vector<const Response*>& responses);
  // Packs the parts' own blocks, allgathers them in the fusion buffer, unpacks.
  Status gather_parts(DataType dtype);

  // executor_collectives.cc: everything but allreduce.
  Status start_collective(TensorEntry& entry, const Response& response,
                          std::unique_ptr<transport::Work>* work);
  Status start_broadcast(TensorEntry& entry, const TensorParams& params,
                         std::unique_ptr<transport::Work>* work);
  Status start_allgather(TensorEntry& entry, const Response& response,
                         std::unique_ptr<transport::Work>* work);
  Status start_alltoall(TensorEntry& entry, const Response& response,
                        std::unique_ptr<transport::Work>* work);
  Status start_reducescatter(TensorEntry& entry, const TensorParams& params,
                             std::unique_ptr<transport::Work>* work);
  Status start_on_transport(transport::CollectiveOp op, transport::CollectiveView view,
                            std::unique_ptr<transport::Work>* work);
  // executor_groups.cc: grouped allgather and reducescatter.
  Status start_grouped_allgather(TensorEntry& entry, const Response& response,
                                 std::unique_ptr<transport::Work>* work);
  Status start_grouped_reducescatter(TensorEntry& entry, const TensorParams& params,
                                     std::unique_ptr<transport::Work>* work);
  Status start_group_part(TensorEntry& entry, transport::CollectiveOp op,
                          const transport::CollectiveView& view,
                          std::vector<std::unique_ptr<transport::Work>>* parts);
  Status finish_group(std::vector<std::unique_ptr<transport::Work>> parts,
                      std::unique_ptr<transport::Work>* work);
  Status allocate_output(TensorEntry& entry, size_t bytes);
  transport::CollectiveView view_of(const TensorEntry& entry) const;

  transport::Selector& selector_;
  FusionBuffer& fusion_;
  int rank_;
  int world_size_;
  Complete complete_;
  Timeline* timeline_;
  uint64_t sequence_ = 0;
  // The operation being launched, for the timeline.
  struct Op {
    size_t bytes = 0;
    Collective kind = Collective::kAllreduce;
    Timeline::Clock::time_point start;
  };
  Op op_;
  const char* transport_name_ = "none";
  size_t threshold_;      // the fusion threshold, <= fusion_.size()
  size_t alone_bytes_;    // the large-tensor cut-off
  uint64_t allreduced_bytes_ = 0;
  size_t carry_bytes_ = 0;  // KOLO_AND_CARRY_BYTES
  const std::vector<const char*>* carried_ = nullptr;  // execute()'s, while it runs
  std::vector<char> zeros_;  // a joined rank's host contribution; grow-only, all zero
  std::vector<char> sink_;   // where a joined rank's host results go; grow-only
  std::shared_ptr<OutputPool> outputs_ = std::make_shared<OutputPool>();
  transport::DeviceSupport* device_;
  FlightRecorder* flight_ = nullptr;
  std::deque<InFlight> in_flight_;
  // Per-bucket scratch, reused so that a bucket allocates nothing once warm.
  transport::Bucket bucket_;
  std::vector<TensorEntry*> entries_;
  std::vector<const std::string*> names_;  // into the cycle's responses
  std::vector<const Response*> ok_, joined_;  // execute()'s, into the cycle's responses
  std::vector<PlannedBucket> plan_;             // execute()'s plan, kept for its storage
  PlanScratch plan_scratch_;
  // A fused allgather's parts (tensors, or a group's members) and their element
  // counts from each rank, part-major ([k * world_size + r]); reused.
  struct GatherPart {
    const void* input;
    char* output;
  };
  std::vector<GatherPart> parts_;
  std::vector<int64_t> part_counts_;
  std::vector<int64_t> cursor_;  // per rank, in elements
};

// Note [One execution model]
// Every transport call — a bucket or a collective, host or device — returns Work,
// and its entries leave `pending` with it. Host work (CPU memory) is waited for
// at once: the next bucket reuses the staging buffer and the shm engine's slots,
// and the caller's memory is read in place. Device work only queues kernels on
// the transport's stream, and waiting for the GPU would stall negotiation of the
// next cycle behind this one; so it stays in in_flight_, its handles learn the
// Work's done event (kolo_handle_stream_wait), and the coordinator polls it
// whenever it is awake (the transport wakes it when device work finishes). Names
// stay in flight (duplicates refused) until their Work completes.

// Note [Grouped collectives]
// A group (kolo_grouped_*_async) is one name in negotiation — its members are
// ready on every rank together or not at all, and a mismatch in any member fails
// the whole group on every rank — and one entry here. A grouped allreduce is one
// bucket (never split, never mixed). A grouped allgather in host memory that
// fits is one packed allgather (Note [Fused allgather and broadcast]); otherwise
// a grouped allgather or reducescatter runs as one transport call per member, in
// member order, within the group's slot of the cycle: the same transports and the
// same results as the members alone, with no other tensor between them. Host parts run one after another (transports reuse
// their scratch); device parts queue in order on the transport's stream.

// Note [Fused allgather and broadcast]
// As Horovod does, ready allgathers of one dtype, and broadcasts of one dtype and
// root, in host memory, are one operation per bucket (plan_cycle). An allgather
// bucket's block from rank r is the concatenation of its tensors' rows from r:
// each rank packs its own tensors into its block of the fusion buffer, the
// transport gathers in place (input = this rank's block of the output), and each
// tensor's rows are copied from every rank's block into its own output. A
// broadcast bucket is the root's inputs packed one after another, broadcast in
// place, copied out into each tensor's output. The fusion buffer bounds a
// bucket (the threshold is at most its size), so nothing is allocated per call;
// a tensor past the large-tensor cut-off, or on a device, runs alone. A grouped
// allgather below the threshold and the cut-off is packed the same way as one
// bucket (its members are the parts), else member by member.

// Note [Scaling and average]
// What AVERAGE and the factors become is decided in one place,
// transport::decide_reduction(), for buckets and reducescatters alike; the
// transport that runs the work applies all of it (transport.h, Reduction).

}  // namespace kolo::core
