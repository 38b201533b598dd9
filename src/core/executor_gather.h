// GatherFamily: allgather (alone, fused, grouped) and broadcast (alone, fused).
// A bucket of one response runs as that collective alone (a group member by
// member: Note [Grouped collectives] in executor_context.h); a bucket of several
// allgathers or broadcasts, and a grouped allgather that fits, runs as one
// operation through the fusion buffer (Note [Fused allgather and broadcast]).
// Coordinator thread only, through the Executor.
#pragma once

#include <cstdint>
#include <vector>

#include "core/executor_context.h"

namespace kolo::core {

class GatherFamily : public Family {
 public:
  explicit GatherFamily(ExecutionContext& context) : context_(context) {}

  Status start(Batch& batch, std::unique_ptr<transport::Work>* work) override;
  Status next(Batch& batch, std::unique_ptr<transport::Work>* work) override;
  bool pack(const Response& response, const TensorEntry& entry, char* slot, size_t limit,
            size_t capacity) override;

 private:
  enum class Step { kNone, kUnpackAllgather, kUnpackBroadcast, kMembers };

  Status start_broadcast(TensorEntry& entry, const TensorParams& params,
                         std::unique_ptr<transport::Work>* work);
  // Where an allgather's gathered rows (`bytes`) go: the caller's output
  // (kolo_allgather_into) or one allocated on the handle, which gets the splits
  // if there is one.
  Status output_for(TensorEntry& entry, const Response& response, size_t bytes, char** out);
  Status start_allgather(TensorEntry& entry, const Response& response,
                         std::unique_ptr<transport::Work>* work);
  // A grouped allgather member by member: its output, then the members from
  // member_ on (start_members()).
  Status start_grouped(TensorEntry& entry, const Response& response,
                       std::unique_ptr<transport::Work>* work);
  Status start_member(size_t m, std::unique_ptr<transport::Work>* work);

  // Note [Fused allgather and broadcast]: packs, starts the one operation on the
  // fusion buffer; the unpack is next()'s. plan_parts() allocates the outputs and
  // lists the parts.
  Status plan_parts(Batch& batch);
  Status start_fused_allgather(Batch& batch, std::unique_ptr<transport::Work>* work);
  Status start_fused_broadcast(Batch& batch, std::unique_ptr<transport::Work>* work);
  void unpack_allgather();
  void unpack_broadcast(const Batch& batch);

  ExecutionContext& context_;
  Step step_ = Step::kNone;  // what next() finishes
  // A grouped allgather in progress: its entry and response, the next member,
  // and where that member's rows go.
  TensorEntry* group_entry_ = nullptr;
  const Response* group_response_ = nullptr;
  size_t member_ = 0;
  char* member_out_ = nullptr;
  // A fused allgather's parts (tensors, or a group's members) and their element
  // counts from each rank, part-major ([k * world_size + r]); reused.
  struct GatherPart {
    const void* input;
    char* output;
  };
  std::vector<GatherPart> parts_;
  std::vector<int64_t> part_counts_;
  std::vector<int64_t> cursor_;  // per rank, in elements
  DataType fused_dtype_ = DataType::kFloat32;
  transport::CollectiveView part_;  // pack()'s, reused
};

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

}  // namespace kolo::core
