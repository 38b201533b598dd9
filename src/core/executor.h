// Executor: turns the negotiated, ordered responses of one cycle into transport
// work. It is a shell around one family per kind of collective, each planning,
// starting and finishing its own:
//
//   AllreduceFamily      allreduce buckets: staging, joined ranks' zeros, the
//                        carried bucket                      (executor_allreduce.h)
//   GatherFamily         allgather and broadcast, alone, fused, grouped
//                                                            (executor_gather.h)
//   AlltoallFamily       alltoall                            (executor_alltoall.h)
//   ReducescatterFamily  reducescatter, alone and grouped    (executor_reducescatter.h)
//   NegotiatedFamily     barrier and join                    (executor_negotiated.h)
//
// What they share — the world's shape, the selector, the fusion buffer, outputs,
// the carried parts, per-bucket scratch — is one ExecutionContext
// (executor_context.h). The shell keeps the cycle: it fails the names whose
// response is an error, cuts the rest into buckets with the fusion planner
// (plan_cycle), and hands each bucket to its family; every Work a family starts
// goes through launch() (Note [One execution model]), which also records the
// operation in the timeline; device work in flight is the shell's to poll.
// Coordinator thread only; runs identically on every rank.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/executor_allreduce.h"
#include "core/executor_alltoall.h"
#include "core/executor_context.h"
#include "core/executor_gather.h"
#include "core/executor_negotiated.h"
#include "core/executor_reducescatter.h"
#include "core/flight_recorder.h"
#include "core/timeline.h"

namespace kolo::core {

class Executor {
 public:
  // Completes one local tensor (the runtime forgets it and completes its handle);
  // `at` is when it completed (a clock read the caller made anyway).
  using Complete = std::function<void(TensorEntry&, Status, Clock::time_point at)>;

  // `timeline` may be null (no timeline); `device_support` is null when the world
  // takes no device tensors; `host_outputs` says where host outputs come from.
  Executor(transport::Selector& selector, FusionBuffer& fusion, int rank, int world_size,
           Complete complete, Timeline* timeline,
           transport::DeviceSupport* device_support = nullptr,
           transport::HostMemory host_outputs = {});

  // `pending` maps this rank's in-flight names to their entries; every OK response
  // names an entry in it — except allreduces this rank takes part in after it
  // joined, for which it contributes zeros (Note [Join] in negotiator.h). Error
  // responses complete the entry if this rank has one. Allreduce buckets run
  // first, then the other buckets, each group of buckets in the order of their
  // first response; both orders are the same on every rank. Entries leave
  // `pending` when their work is launched.
  // `carried` (may be null): the cycle rode with the AND, and carried[r] is rank
  // r's packed part (Note [Data rides with the AND] in negotiator.h).
  // `negotiated`: when the negotiation ended (the caller's clock read), which
  // stands for the first bucket's start (Note [Where a small operation's time
  // goes] in handle.h); the epoch: read the clock.
  void execute(const std::vector<Response>& responses, Pending* pending,
               const std::vector<const char*>* carried = nullptr,
               Clock::time_point negotiated = {});

  // Note [Data rides with the AND]: before the AND, if `ahead` (this rank's
  // cached requests in bit order) is one host allreduce bucket, or one other
  // collective alone, of at most min(capacity, the carry bytes), writes this
  // rank's part at `slot` and returns true.
  bool pack_ahead(const std::vector<const Response*>& ahead, Pending* pending, char* slot,
                  size_t capacity);
  // Note [A call alone] (coordinator.h): packs `entry`, a host collective of one
  // tensor whose cached response is `response`, as pack_ahead() would pack the
  // list of that one response, and returns true; false where it would not ride.
  // finish_alone() completes an allreduce from every rank's carried parts,
  // run_alone() any other collective as its family does in a cycle that carried
  // (the entry's handle gets its outputs); both advance the sequence as a bucket
  // does, and run_alone() returns the operation's status.
  bool pack_alone(const TensorEntry& entry, const Response& response, char* slot,
                  size_t capacity);
  void finish_alone(const std::vector<const char*>& carried);
  Status run_alone(TensorEntry& entry, const Response& response,
                   const std::vector<const char*>& carried);
  // KOLO_AND_CARRY_BYTES; every rank sets the same (0: nothing is packed).
  void set_carry_bytes(size_t bytes) { context_.carry_bytes = bytes; }

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
  uint64_t allreduced_bytes() const { return allreduce_.started_bytes(); }

 private:
  struct InFlight {
    std::unique_ptr<transport::Work> work;
    std::vector<TensorEntry> entries;
  };

  Family& family_for(Collective collective);
  // One planned bucket: its batch, its executing stamps, then launch().
  void run(Family& family, const PlannedBucket& bucket, Pending* pending);
  // Every transport call ends here (Note [One execution model]): starts the
  // batch through its family; the entries named in the batch complete with the
  // Work's status — at once, in `pending`, for host work (waited for step by
  // step); from poll() for device work, moved into in_flight_ — or with the
  // start's error. Either way they leave `pending`.
  void launch(Family& family, Batch& batch, DeviceKind where, Pending* pending);
  // Host work: waits for `work` and starts the family's next step until none is
  // left or one fails; returns `status` (the start's) or the first failure.
  Status settle_host(Family& family, Batch& batch, Status status,
                     std::unique_ptr<transport::Work>* work);
  // Completes every entry that has a handle with `status`.
  void complete_all(std::vector<TensorEntry>& entries, const Status& status);
  void retire(InFlight& done);
  // Records the operation being launched (op_, the batch's names) in the
  // timeline and advances the sequence number; from launch().
  void record(const Batch& batch);

  ExecutionContext context_;
  AllreduceFamily allreduce_;
  GatherFamily gather_;
  AlltoallFamily alltoall_;
  ReducescatterFamily reducescatter_;
  NegotiatedFamily negotiated_;

  Complete complete_;
  Clock::time_point first_start_{};  // execute()'s `negotiated`, until the first bucket runs
  Timeline* timeline_;
  FlightRecorder* flight_ = nullptr;
  std::deque<InFlight> in_flight_;
  // The operation being launched, for the timeline.
  struct Op {
    size_t bytes = 0;
    Collective kind = Collective::kAllreduce;
    Timeline::Clock::time_point start;
  };
  Op op_;
  // Reused from cycle to cycle: execute()'s lists, into the cycle's responses,
  // and the batch being run.
  std::vector<const Response*> ok_, joined_;
  Batch batch_;
};

// Note [One execution model]
// Every transport call — a bucket or a collective, host or device — returns Work,
// and its entries leave `pending` with it; launch() is the one place that waits.
// Host work (CPU memory) is waited for at once: the next bucket reuses the
// staging buffer and the shm engine's slots, and the caller's memory is read in
// place; a family whose host work takes several steps (a fused operation's
// copies out, a group's members) is given each next step once the last one has
// ended. Device work only queues kernels on the transport's stream, and waiting
// for the GPU would stall negotiation of the next cycle behind this one; so it
// stays in in_flight_, its handles learn the Work's done event
// (kolo_handle_stream_wait), and the coordinator polls it whenever it is awake
// (the transport wakes it when device work finishes). Names stay in flight
// (duplicates refused) until their Work completes.

}  // namespace kolo::core
