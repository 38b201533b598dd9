// Executor: turns the negotiated, ordered responses of one cycle into work.
//
// For each cycle it fails the names whose response is an error, cuts the rest into
// buckets with the fusion planner, and for each bucket: packs it into the fusion
// buffer (applying prescale on the way in), has the selected transport reduce it,
// and unpacks it (applying postscale and the average on the way out). A bucket of
// one tensor skips the fusion buffer: it is reduced from the caller's input
// straight into the caller's output. See Note [Scaling and average].
// Coordinator thread only; runs identically on every rank.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/fusion_buffer.h"
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

  // `timeline` may be null (no timeline).
  Executor(transport::Selector& selector, FusionBuffer& fusion, int rank, int world_size,
           Complete complete, Timeline* timeline);

  // `pending` maps this rank's in-flight names to their entries; every OK response
  // names an entry in it — except allreduces this rank takes part in after it
  // joined, for which it contributes zeros. Error responses complete the entry if
  // this rank has one. Allreduce buckets run first, then the other collectives in
  // response order; both orders are the same on every rank.
  void execute(const std::vector<Response>& responses, std::map<std::string, TensorEntry>* pending);

 private:
  void run_allreduces(const std::vector<const Response*>& ok,
                      std::map<std::string, TensorEntry>* pending);
  Status run_fused(const std::vector<TensorEntry*>& entries, const TensorParams& params);
  Status run_alone(TensorEntry& entry, const TensorParams& params);
  Status run_group(TensorEntry& entry, const TensorParams& params);
  Status reduce(const void* input, void* output, const TensorParams& params);
  void finish_in_place(void* data, int64_t count, const TensorParams& params);
  TensorEntry zero_entry(const Response& response);

  // executor_collectives.cc: everything but allreduce.
  Status run_collective(TensorEntry& entry, const Response& response);
  Status run_broadcast(TensorEntry& entry, const TensorParams& params);
  Status run_allgather(TensorEntry& entry, const Response& response);
  Status run_alltoall(TensorEntry& entry, const Response& response);
  Status run_reducescatter(TensorEntry& entry, const TensorParams& params);
  Status transport_collective(transport::CollectiveOp op, transport::CollectiveView view);

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
};

// Note [Scaling and average]
// CPU transports reduce with SUM/MIN/MAX/PRODUCT only. The executor multiplies by
// prescale while packing (or into the output, for a lone tensor) and multiplies by
// postscale / size for AVERAGE while unpacking, so scaling costs no extra pass over
// a fused bucket. Integer AVERAGE sums and then divides, truncating toward zero.

}  // namespace kolo::core
