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
#include "core/request.h"
#include "core/tensor_queue.h"
#include "transport/registry.h"

namespace kolo::core {

class Executor {
 public:
  // Completes one local tensor (the runtime forgets it and completes its handle).
  using Complete = std::function<void(TensorEntry&, Status)>;

  Executor(transport::Selector& selector, FusionBuffer& fusion, int world_size,
           Complete complete);

  // `pending` maps this rank's in-flight names to their entries; every OK response
  // names an entry in it. Error responses complete the entry if this rank has one.
  void execute(const std::vector<Response>& responses, std::map<std::string, TensorEntry>* pending);

 private:
  Status run_fused(const std::vector<TensorEntry*>& entries, const TensorParams& params);
  Status run_alone(TensorEntry& entry, const TensorParams& params);
  Status reduce(const void* input, void* output, const TensorParams& params);
  void finish_in_place(void* data, const TensorParams& params);

  transport::Selector& selector_;
  FusionBuffer& fusion_;
  int world_size_;
  Complete complete_;
  uint64_t sequence_ = 0;
};

// Note [Scaling and average]
// CPU transports reduce with SUM/MIN/MAX/PRODUCT only. The executor multiplies by
// prescale while packing (or into the output, for a lone tensor) and multiplies by
// postscale / size for AVERAGE while unpacking, so scaling costs no extra pass over
// a fused bucket. Integer AVERAGE sums and then divides, truncating toward zero.

}  // namespace kolo::core
