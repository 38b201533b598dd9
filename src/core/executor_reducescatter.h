// ReducescatterFamily: a reducescatter alone, and a grouped one member by member
// (Note [Grouped collectives] in executor_context.h). Each rank receives its
// shard of rows (shard_rows); the reduction is decided as a bucket's is (Note
// [Scaling and average] in executor_allreduce.h). Coordinator thread only,
// through the Executor.
#pragma once

#include "core/executor_context.h"

namespace kolo::core {

class ReducescatterFamily : public Family {
 public:
  explicit ReducescatterFamily(ExecutionContext& context) : context_(context) {}

  Status start(Batch& batch, std::unique_ptr<transport::Work>* work) override;
  // A group's next member (host memory).
  Status next(Batch& batch, std::unique_ptr<transport::Work>* work) override;
  // Note [Data rides with the AND]: this rank's input, prescaled.
  bool pack(const Response& response, const TensorEntry& entry, char* slot, size_t limit,
            size_t capacity) override;

 private:
  Status start_member(size_t m, std::unique_ptr<transport::Work>* work);

  ExecutionContext& context_;
  // A grouped reducescatter in progress: its entry and parameters, the decided
  // reduction and the next member.
  TensorEntry* group_entry_ = nullptr;
  const TensorParams* group_params_ = nullptr;
  transport::Reduction group_reduction_;
  size_t member_ = 0;
  transport::CollectiveView part_;  // pack()'s, reused
};

}  // namespace kolo::core
