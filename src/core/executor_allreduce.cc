#include "core/executor_allreduce.h"

#include <algorithm>

#include "transport/reduction.h"

namespace kolo::core {

Status AllreduceFamily::start(Batch& batch, std::unique_ptr<transport::Work>* work) {
  started_bytes_ += batch.bytes;
  Status described;
  if (!context_.packed) {  // else the bucket is this batch's (Note [A carried bucket is planned once])
    bucket_.tensors.clear();
    bucket_.count = 0;
    described = describe(batch.entries, *batch.params);
  }
  context_.deterministic = bucket_.reduction.deterministic;
  if (context_.carried != nullptr) {  // Note [Data rides with the AND]: packed on every rank
    KOLO_RETURN_IF_ERROR(described);
    context_.transport_name = context_.carrier->name();
    context_.carrier->finish(bucket_, *context_.carried);
    return Status::OK();
  }
  if (!described.ok() || bucket_.count == 0) return described;
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR_AS_IS(context_.selector.select(bucket_, &transport));
  context_.transport_name = transport->name();
  *work = transport->allreduce(bucket_);
  return Status::OK();
}

Status AllreduceFamily::describe(const std::vector<TensorEntry*>& entries,
                                 const TensorParams& params) {
  transport::Bucket* b = &bucket_;
  b->dtype = params.dtype;
  b->reduction = transport::decide_reduction(params.op, params.dtype, params.prescale,
                                             params.postscale, context_.world_size,
                                             params.deterministic);
  b->sequence = context_.sequence;
  const bool host = params.device_kind == DeviceKind::kCpu;
  b->device = Device{params.device_kind, host ? 0 : -1, nullptr};
  for (const TensorEntry* e : entries) {
    if (!host && e->device.index >= 0) b->device.index = e->device.index;
    if (e->members.empty()) {
      b->tensors.push_back({e->input, e->output, e->request.params.count, e->ready});
      continue;
    }
    for (const TensorEntry::Member& m : e->members)
      b->tensors.push_back({m.input, m.output, m.elements, e->ready});
  }
  for (const transport::BucketTensor& t : b->tensors) b->count += t.count;
  if (host) {
    b->staging = context_.fusion.data();
    b->staging_bytes = context_.fusion.size();
    return Status::OK();
  }
  return b->device.index < 0 ? context_.resolve(&b->device) : Status::OK();
}

// The host buffers are sized for the largest joined tensor before any entry
// points into them: growing them later in the cycle would move memory that
// earlier entries of the same cycle still point at. A group's members all read
// zeros and write into the sink; nothing reads a joined rank's results.
Status AllreduceFamily::add_zero_entries(const std::vector<const Response*>& joined,
                                         Pending* pending) {
  size_t host_bytes = 0;
  for (const Response* r : joined)
    if (r->params.device_kind == DeviceKind::kCpu) host_bytes = std::max(host_bytes, r->params.bytes());
  if (zeros_.size() < host_bytes) zeros_.assign(host_bytes, 0);
  if (sink_.size() < host_bytes) sink_.resize(host_bytes);
  Status status;
  for (const Response* r : joined) {
    const TensorParams& p = r->params;
    TensorEntry e;  // no handle: completing it is a no-op
    e.request.name = r->name;
    e.request.params = p;
    e.device = Device{p.device_kind, -1, nullptr};
    e.input = zeros_.data();
    e.output = sink_.data();
    if (p.device_kind != DeviceKind::kCpu) {
      const size_t bytes = std::max<size_t>(p.bytes(), 1);
      Status s = context_.resolve(&e.device);
      if (s.ok()) s = context_.device_support->allocate_zeros(e.device, 2 * bytes, &e.zeros);
      if (!s.ok()) {
        status = s.with_context(r->name);
        continue;
      }
      e.input = e.zeros.get();
      e.output = e.zeros.get() + bytes;
    }
    if (p.collective == Collective::kGroupedAllreduce)
      for (int64_t elements : p.member_counts) e.members.push_back({e.input, e.output, elements});
    pending->emplace(r->name, std::move(e));
  }
  return status;
}

// Every refusal depends only on the list (cached parameters, the same on every
// rank whose list is the same), the sizes every rank sets alike and the
// selector's choice, which is the same on every rank; a rank that refuses sends
// no flag and so differs from the ranks that packed.
bool AllreduceFamily::pack_bucket(const std::vector<const Response*>& ahead, Pending* pending,
                                  char* slot, size_t limit) {
  size_t bytes = 0;
  for (const Response* r : ahead) {
    if (r->params.device_kind != DeviceKind::kCpu || !is_allreduce(r->params.collective))
      return false;
    bytes += r->params.bytes();
    if (bytes > limit) return false;
  }
  std::vector<PlannedBucket>& plan = context_.plan;
  plan_cycle(ahead, context_.world_size, context_.threshold, context_.alone_bytes,
             &context_.plan_scratch, &plan);
  if (plan.size() != 1 || plan[0].items.size() != ahead.size()) return false;
  entries_.clear();
  for (size_t i : plan[0].items) {
    auto it = pending->find(ahead[i]->name);
    if (it == pending->end()) return false;  // not this rank's own (it packs nothing then)
    entries_.push_back(&it->second);
  }
  bucket_.tensors.clear();
  bucket_.count = 0;
  if (!describe(entries_, ahead[plan[0].items[0]]->params).ok() || bucket_.count == 0)
    return false;
  if (!context_.carrier->fits(bucket_, limit)) return false;
  // Only where the transport the bucket would take completes it from carried
  // bytes with this very carrier.
  transport::Transport* transport = nullptr;
  if (!context_.selector.select(bucket_, &transport).ok() || transport->carrier() != context_.carrier)
    return false;
  context_.carrier->pack(bucket_, slot);
  context_.packed = true;
  return true;
}

bool AllreduceFamily::pack_alone(const TensorEntry& entry, const TensorParams& params, char* slot,
                                 size_t limit) {
  if (params.device_kind != DeviceKind::kCpu || params.collective != Collective::kAllreduce ||
      params.bytes() > limit || context_.carrier == nullptr)
    return false;
  // A plan of one tensor is one bucket of it, as plan_cycle makes it.
  bucket_.tensors.clear();
  bucket_.count = 0;
  entries_.assign(1, const_cast<TensorEntry*>(&entry));  // describe() only reads it
  if (!describe(entries_, params).ok() || bucket_.count == 0) return false;
  if (!context_.carrier->fits(bucket_, limit)) return false;
  transport::Transport* transport = nullptr;
  if (!context_.selector.select(bucket_, &transport).ok() || transport->carrier() != context_.carrier)
    return false;
  context_.carrier->pack(bucket_, slot);
  return true;
}

void AllreduceFamily::finish_alone(const std::vector<const char*>& carried) {
  started_bytes_ += bucket_.count * dtype_size(bucket_.dtype);
  context_.carrier->finish(bucket_, carried);
}

}  // namespace kolo::core
