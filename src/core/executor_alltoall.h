// AlltoallFamily: an alltoall alone, one transport call; its output is
// allocated here (handle-owned), its counts come from the negotiated matrix of
// rows. Coordinator thread only, through the Executor.
#pragma once

#include "core/executor_context.h"

namespace kolo::core {

class AlltoallFamily : public Family {
 public:
  explicit AlltoallFamily(ExecutionContext& context) : context_(context) {}

  Status start(Batch& batch, std::unique_ptr<transport::Work>* work) override;
  // Note [Data rides with the AND]: this rank's input with its blocks' offsets.
  bool pack(const Response& response, const TensorEntry& entry, char* slot, size_t limit,
            size_t capacity) override;

 private:
  ExecutionContext& context_;
  transport::CollectiveView part_;  // pack()'s, reused
};

}  // namespace kolo::core
