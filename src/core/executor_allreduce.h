// AllreduceFamily: allreduce buckets, grouped ones included. Each bucket is
// described the one way every transport receives it (transport::Bucket: its
// tensors, the decided Reduction, the fusion buffer as staging) and handed to
// the transport the selector picks; in a cycle whose bucket rode with the AND it
// is finished from the carried parts instead. A rank that has joined takes part
// with zeros in and a scratch sink out (Note [Join] in negotiator.h).
// Coordinator thread only, through the Executor.
#pragma once

#include <cstdint>
#include <vector>

#include "core/executor_context.h"

namespace kolo::core {

class AllreduceFamily : public Family {
 public:
  explicit AllreduceFamily(ExecutionContext& context) : context_(context) {}

  Status start(Batch& batch, std::unique_ptr<transport::Work>* work) override;

  // Entries for the allreduces this rank joined (in `pending`, without handles):
  // zeros in, results dropped. An error names the tensor whose entry could not
  // be made (its bucket then goes on without it).
  Status add_zero_entries(const std::vector<const Response*>& joined, Pending* pending);

  // Note [Data rides with the AND]: if `ahead` (this rank's cached requests in
  // bit order, every one this rank's own) is one host allreduce bucket of at most
  // `limit` bytes that a carrying transport would take, writes this rank's part
  // at `slot` and returns true.
  bool pack_bucket(const std::vector<const Response*>& ahead, Pending* pending, char* slot,
            size_t limit);

  // Note [A call alone] (coordinator.h): `entry`, a host allreduce of one
  // tensor with parameters `params`, as a bucket of its own, packed at `slot`
  // as pack_bucket packs a list of that one request; false where it would not
  // ride. finish_alone() then completes it from every rank's carried parts.
  bool pack_alone(const TensorEntry& entry, const TensorParams& params, char* slot, size_t limit);
  void finish_alone(const std::vector<const char*>& carried);

  // Bytes of the buckets started so far (the autotuner's measure).
  uint64_t started_bytes() const { return started_bytes_; }

 private:
  // The bucket of `entries` (all of one fusion class) into bucket_.
  Status describe(const std::vector<TensorEntry*>& entries, const TensorParams& params);

  ExecutionContext& context_;
  // One Bucket, reused: its tensor list keeps its capacity between buckets.
  transport::Bucket bucket_;
  std::vector<TensorEntry*> entries_;  // pack()'s
  uint64_t started_bytes_ = 0;
  std::vector<char> zeros_;  // a joined rank's host contribution; grow-only, all zero
  std::vector<char> sink_;   // where a joined rank's host results go; grow-only
};

// Note [Scaling and average]
// What AVERAGE and the factors become is decided in one place,
// transport::decide_reduction(), for buckets and reducescatters alike; the
// transport that runs the work applies all of it (transport.h, Reduction).

// Note [A carried bucket is planned once]
// Before the AND, pack_bucket plans this rank's list and describes its one
// bucket to pack it (Note [Data rides with the AND] in negotiator.h). When the
// cycle then carries, its ready list is that very list, and nothing between
// the AND and the execution changes the sizes the plan depends on (a cycle
// with an announcement does not carry), so execute() and start() use that plan
// and that bucket instead of making them again. Planning and describing took
// 3.1 % of a cached 8-byte allreduce's samples when each ran twice (perf,
// docs/perf/small-ops.md, "A carried bucket is planned once").

}  // namespace kolo::core
