// The "shm" transport: allreduce on its ShmAllreduce, the other collectives on
// its ShmCollectives, and the stage and support answer hierarchical shares.
#include "transports/shm/transport.h"

#include <memory>
#include <string>

#include "common/check.h"

namespace kolo::shm {

using transport::CollectiveView;

ShmTransport::ShmTransport(std::unique_ptr<ShmAllreduce> engine)
    : ShmTransport(std::move(engine), nullptr) {}

ShmTransport::ShmTransport(std::unique_ptr<ShmAllreduce> engine,
                           std::unique_ptr<ShmCollectives> collectives)
    : engine_(std::move(engine)),
      collectives_(std::move(collectives)),
      // Engineless, it carries nothing anyway.
      carrier_(engine_ ? engine_->local_rank() : 0, engine_.get(), collectives_.get()) {}

ShmTransport::~ShmTransport() = default;

Status shm_supports(const char* name, const transport::Bucket& bucket) {
  if (bucket.device.kind != DeviceKind::kCpu) {
    return unsupported(std::string(name) + ": CPU memory only, the bucket is on " +
                       device_name(bucket.device));
  }
  return Status::OK();
}

ShmAllreduce::ShardStage finish_stage(const transport::Reduction& r, DataType dtype,
                                      std::function<Status(void*, int64_t)> before) {
  ShmAllreduce::ShardStage stage;
  stage.per_element = !before;
  if (!r.scales_output()) {
    stage.apply = std::move(before);
    return stage;
  }
  stage.apply = [before = std::move(before), r, dtype](void* shard, int64_t count) {
    if (before) KOLO_RETURN_IF_ERROR_AS_IS(before(shard, count));
    transport::finish_output(r, shard, count, dtype);
    return Status::OK();
  };
  return stage;
}

Status ShmTransport::supports(const transport::Bucket& bucket) const {
  return shm_supports(name(), bucket);
}

// The engine reads the tensors in place, applies the prescale as it first reads
// each element and the output factor per piece in cache: a fused bucket is never
// packed into a staging buffer and out.
std::unique_ptr<transport::Work> ShmTransport::allreduce(const transport::Bucket& bucket) {
  const transport::Reduction& r = bucket.reduction;
  const ShmAllreduce::ShardStage stage = finish_stage(r, bucket.dtype, nullptr);
  return std::make_unique<transport::CompletedWork>(
      engine_->run(bucket.tensors, bucket.dtype, r.op, stage, r.prescale, r.deterministic));
}

// Note [Which collectives shm takes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every one the engine supports, at every size: on a quiet machine the slot
// engine beat MPICH from 4 KiB to 256 MiB in all four collectives, alltoall
// included, at 2 ranks and at 4 ranks on 2 cores (docs/perf/shm-collectives.md,
// "Which collectives shm takes"). The answer depends only on the view, so it is
// the same on every rank.
Status ShmTransport::supports_collective(Collective op, const CollectiveView& view) const {
  if (!collectives_) return Transport::supports_collective(op, view);
  return collectives_->supports(op, view);
}

std::unique_ptr<transport::Work> ShmTransport::collective(Collective op,
                                                          const CollectiveView& view) {
  if (!collectives_) return Transport::collective(op, view);
  return std::make_unique<transport::CompletedWork>(collectives_->run(op, view));
}

}  // namespace kolo::shm
