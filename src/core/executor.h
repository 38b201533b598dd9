// Executor: turns the negotiated, ordered responses of one cycle into work.
//
// For each cycle it fails the names whose response is an error, cuts the rest into
// buckets with the fusion planner, and for each bucket: packs it into the fusion
// buffer (applying prescale on the way in), has the selected transport reduce it,
// and unpacks it (applying postscale and the average on the way out). A bucket of
// one tensor skips the fusion buffer: it is reduced from the caller's input
// straight into the caller's output. See Note [Scaling and average].
// Device buckets and collectives are handed to the device transport whole and run
// asynchronously: see Note [Device work in flight].
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
  // joined, for which it contributes zeros. Error responses complete the entry if
  // this rank has one. Allreduce buckets run first, then the other collectives in
  // response order; both orders are the same on every rank.
  void execute(const std::vector<Response>& responses, std::map<std::string, TensorEntry>* pending);

  // Device work in flight: completes what has finished, in launch order per test;
  // returns true if anything completed. Cheap when nothing is in flight.
  bool poll();
  bool busy() const { return !in_flight_.empty(); }
  // Where buckets record that their operations started executing; null: nowhere.
  void set_flight_recorder(FlightRecorder* flight) { flight_ = flight; }
  // Waits for everything in flight and completes it (shutdown).
  void finish_all();

 private:
  struct InFlight {
    std::unique_ptr<transport::Work> work;
    std::vector<TensorEntry> entries;
  };
  // Device buckets and collectives: hands `entries` (moved out of `pending`) to
  // the transport's Work, or completes them with the launch error.
  void launch(Status launched, std::unique_ptr<transport::Work> work,
              std::vector<TensorEntry> entries);
  // Completes every entry that has a handle with `status`.
  void complete_all(std::vector<TensorEntry>& entries, const Status& status);
  // Waits for a finished (or, at shutdown, any) in-flight Work and completes it.
  void retire(InFlight& done);
  std::unique_ptr<transport::Work> start_device_bucket(const std::vector<TensorEntry*>& entries,
                                                       const TensorParams& params, Status* status);

  void run_allreduces(const std::vector<const Response*>& ok,
                      std::map<std::string, TensorEntry>* pending);
  void record_bucket(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                     const TensorParams& params, Timeline::Clock::time_point start);
  // Packed into the fusion buffer, or handed over unpacked to a transport that
  // takes_tensors(): Note [Fused buckets unpacked].
  Status run_fused(const std::vector<TensorEntry*>& entries, const TensorParams& params);
  Status run_alone(TensorEntry& entry, const TensorParams& params);
  Status run_group(TensorEntry& entry, const TensorParams& params);
  // A CPU bucket as a transport sees it, without its buffers.
  transport::BucketView host_view(const TensorParams& params) const;
  // For a transport that scales_output(): the output factor, or integer AVERAGE's
  // division, goes into the view (BucketView) instead of a pass of ours.
  void hand_over_output_factor(const TensorParams& params, transport::BucketView* view) const;
  void finish_in_place(void* data, int64_t count, const TensorParams& params);
  TensorEntry zero_entry(const Response& response);

  // executor_collectives.cc: everything but allreduce.
  Status run_collective(TensorEntry& entry, const Response& response);
  Status run_broadcast(TensorEntry& entry, const TensorParams& params);
  Status run_allgather(TensorEntry& entry, const Response& response);
  Status run_alltoall(TensorEntry& entry, const Response& response);
  Status run_reducescatter(TensorEntry& entry, const TensorParams& params);
  Status transport_collective(transport::CollectiveOp op, transport::CollectiveView view);
  Status allocate_output(TensorEntry& entry, size_t bytes);
  static void device_fields(const TensorEntry& entry, transport::CollectiveView* view);

  transport::Selector& selector_;
  FusionBuffer& fusion_;
  int rank_;
  int world_size_;
  Complete complete_;
  Timeline* timeline_;
  uint64_t sequence_ = 0;
  std::vector<char> zeros_;    // a joined rank's contribution; grow-only, all zero
  std::vector<char> sink_;     // where a joined rank's results go; grow-only
  std::vector<char> scratch_;  // prescaled reducescatter input; grow-only
  std::shared_ptr<OutputPool> outputs_ = std::make_shared<OutputPool>();
  transport::DeviceSupport* device_;
  FlightRecorder* flight_ = nullptr;
  std::deque<InFlight> in_flight_;
  // A device collective's Work, left by transport_collective for execute().
  std::unique_ptr<transport::Work> device_work_;
};

// Note [Device work in flight]
// A CPU bucket is reduced before execute() returns. A device bucket only queues
// work on the device transport's stream (pack, NCCL call, unpack); waiting for
// the GPU there would stall negotiation of the next cycle behind the current one.
// So its entries move from `pending` into in_flight_ with the transport's Work,
// their handles learn the Work's done event (kolo_handle_stream_wait), and the
// coordinator calls poll() whenever it is awake — the transport wakes it from a
// host callback on its stream when device work finishes. Names stay in flight
// (duplicates refused) until their Work completes.

// Note [Scaling and average]
// CPU transports reduce with SUM/MIN/MAX/PRODUCT only. The executor multiplies by
// prescale while packing (or into the output, for a lone tensor) and multiplies by
// postscale / size for AVERAGE while unpacking, so scaling costs no extra pass over
// a fused bucket. Integer AVERAGE sums and then divides, truncating toward zero.

}  // namespace kolo::core
