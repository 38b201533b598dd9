#include "core/executor.h"

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "core/fusion_planner.h"

namespace kolo::core {
namespace {

// Note [Large tensors skip the fusion buffer]
// Fusing saves a transport call per tensor but, for a transport that packs, costs
// a copy into the staging buffer and one out: past about a megabyte the copies
// cost more than the call, so such a tensor is a bucket of its own and is reduced
// straight from the caller's input into its output. Between 64 KiB and 4 MiB the
// ResNet-50 step cannot tell the cut-offs apart on the 2-core VM; the
// measurements are in docs/perf ("Large-tensor cut-off"). KOLO_LARGE_TENSOR_BYTES
// sets it (default 1 MiB), and the autotuner may change it. The same cut-off
// holds for an allgather's gathered bytes and a broadcast's bytes (plan_cycle):
// a fused one costs the same two copies.

}  // namespace

Executor::Executor(transport::Selector& selector, FusionBuffer& fusion, int rank,
                   int world_size, Complete complete, Timeline* timeline,
                   transport::DeviceSupport* device_support, transport::HostMemory host_outputs)
    : context_(selector, fusion, rank, world_size, device_support, selector.carrier(),
               host_outputs),
      allreduce_(context_),
      gather_(context_),
      alltoall_(context_),
      reducescatter_(context_),
      complete_(std::move(complete)),
      timeline_(timeline) {}

void Executor::set_sizes(size_t fusion_threshold, size_t large_tensor_bytes) {
  context_.threshold = std::min(fusion_threshold, context_.fusion.size());
  context_.alone_bytes = large_tensor_bytes;
}

Family& Executor::family_for(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
    case Collective::kGroupedAllreduce: return allreduce_;
    case Collective::kAllgather:
    case Collective::kGroupedAllgather:
    case Collective::kBroadcast: return gather_;
    case Collective::kAlltoall: return alltoall_;
    case Collective::kReducescatter:
    case Collective::kGroupedReducescatter: return reducescatter_;
    default: return negotiated_;  // barrier, join (it refuses anything else)
  }
}

void Executor::execute(const std::vector<Response>& responses, Pending* pending,
                       const std::vector<const char*>* carried,
                       Clock::time_point negotiated) {
  first_start_ = negotiated;
  ok_.clear();
  joined_.clear();
  for (const Response& r : responses) {
    auto it = pending->find(r.name);
    if (r.code != Code::kOk) {
      if (it != pending->end()) {
        complete_(it->second, Status(r.code, r.message), Clock::now());
        pending->erase(it);
      }
      continue;
    }
    if (it == pending->end()) {
      KOLO_CHECK(is_allreduce(r.params.collective));
      joined_.push_back(&r);  // Note [Join] in negotiator.h
    }
    ok_.push_back(&r);
  }
  Status zeros = allreduce_.add_zero_entries(joined_, pending);
  if (!zeros.ok()) KOLO_LOG(kError) << "joined rank's zeros: " << zeros.to_string();
  // Note [A carried bucket is planned once] (executor_allreduce.h).
  context_.packed = context_.packed && carried != nullptr;
  if (!context_.packed)
    plan_cycle(ok_, context_.world_size, context_.threshold, context_.alone_bytes,
               &context_.plan_scratch, &context_.plan);
  const std::vector<PlannedBucket>& plan = context_.plan;
  // The packer made this very plan from this very list: one bucket.
  KOLO_CHECK(carried == nullptr || (plan.size() == 1 && joined_.empty()));
  context_.carried = carried;
  for (const PlannedBucket& bucket : plan)
    if (is_allreduce(ok_[bucket.items[0]]->params.collective)) run(allreduce_, bucket, pending);
  for (const PlannedBucket& bucket : plan) {
    const Collective kind = ok_[bucket.items[0]]->params.collective;
    if (!is_allreduce(kind)) run(family_for(kind), bucket, pending);
  }
  context_.carried = nullptr;
  context_.packed = false;
}

// Every refusal depends only on the list, the sizes every rank sets alike and
// the selector's choice (see AllreduceFamily::pack_bucket).
bool Executor::pack_ahead(const std::vector<const Response*>& ahead, Pending* pending,
                          char* slot, size_t capacity) {
  context_.packed = false;
  if (context_.carrier == nullptr) return false;  // no transport carries: nothing rides
  const size_t limit = std::min(capacity, context_.carry_bytes);
  if (ahead.size() != 1 || is_allreduce(ahead[0]->params.collective))
    return allreduce_.pack_bucket(ahead, pending, slot, limit);
  // One collective alone (a plan of one item is one bucket): this rank's part of
  // it, as its transport would read it. Whether it rides is decided after the
  // AND (ExecutionContext::start_on_transport: where the selector picks a
  // transport that carries, on every rank alike).
  const Response& response = *ahead[0];
  auto it = pending->find(response.name);
  if (it == pending->end() || response.params.device_kind != DeviceKind::kCpu) return false;
  return family_for(response.params.collective).pack(response, it->second, slot, limit, capacity);
}

bool Executor::pack_alone(const TensorEntry& entry, const Response& response, char* slot,
                          size_t capacity) {
  context_.packed = false;
  if (context_.carrier == nullptr) return false;  // no transport carries: nothing rides
  const size_t limit = std::min(capacity, context_.carry_bytes);
  if (is_allreduce(response.params.collective))
    return allreduce_.pack_alone(entry, entry.request.params, slot, limit);
  if (response.params.device_kind != DeviceKind::kCpu) return false;
  return family_for(response.params.collective).pack(response, entry, slot, limit, capacity);
}

Status Executor::run_alone(TensorEntry& entry, const Response& response,
                           const std::vector<const char*>& carried) {
  Family& family = family_for(response.params.collective);
  Batch& batch = batch_;
  batch.clear();
  batch.params = &response.params;
  batch.planned_bytes = batch.bytes = response.params.bytes();
  batch.entries.push_back(&entry);
  batch.responses.push_back(&response);
  batch.names.push_back(&response.name);
  op_ = Op{batch.bytes, response.params.collective, Clock::time_point{}};
  context_.carried = &carried;
  // As launch() settles host work, on the entry itself instead of `pending`.
  std::unique_ptr<transport::Work> work;
  Status status = family.start(batch, &work);
  status = settle_host(family, batch, std::move(status), &work);
  context_.carried = nullptr;
  if (!status.ok())
    KOLO_LOG(kError) << "operation " << context_.sequence << ": " << status.to_string();
  record(batch);
  return status;
}

void Executor::finish_alone(const std::vector<const char*>& carried) {
  allreduce_.finish_alone(carried);
  context_.transport_name = "none";
  context_.deterministic = false;
  ++context_.sequence;
}

void Executor::run(Family& family, const PlannedBucket& bucket, Pending* pending) {
  Batch& batch = batch_;
  batch.clear();
  batch.params = &ok_[bucket.items[0]]->params;
  batch.planned_bytes = bucket.bytes;
  for (size_t i : bucket.items) {
    auto it = pending->find(ok_[i]->name);
    if (it == pending->end()) continue;  // a joined rank's entry that could not be made
    batch.entries.push_back(&it->second);
    batch.responses.push_back(ok_[i]);
    batch.names.push_back(&ok_[i]->name);
    batch.bytes += ok_[i]->params.bytes();
  }
  const auto start = first_start_ == Clock::time_point{} ? Clock::now() : first_start_;
  first_start_ = {};
  for (TensorEntry* e : batch.entries) {
    if (flight_) flight_->advance(e->flight, FlightRecorder::State::kExecuting, start);
    if (e->handle) e->handle->stamp(HandleState::kExecuting, start);
  }
  op_ = Op{batch.bytes, batch.params->collective, start};
  launch(family, batch, batch.params->device_kind, pending);
}

void Executor::launch(Family& family, Batch& batch, DeviceKind where, Pending* pending) {
  std::unique_ptr<transport::Work> work;
  Status status = family.start(batch, &work);
  if (status.ok() && work != nullptr && where != DeviceKind::kCpu) {
    record(batch);
    InFlight f{std::move(work), {}};
    for (const std::string* name : batch.names) {
      auto it = pending->find(*name);
      f.entries.push_back(std::move(it->second));
      pending->erase(it);
    }
    if (std::shared_ptr<transport::DeviceEvent> done = f.work->done_event())
      for (TensorEntry& e : f.entries)
        if (e.handle) e.handle->launched(done);
    in_flight_.push_back(std::move(f));
    return;
  }
  // Host work, or nothing started: settled now, step by step, and completed in
  // place in `pending`. See Note [One execution model].
  status = settle_host(family, batch, std::move(status), &work);
  const auto transported = Clock::now();  // also each entry's completion
  if (!status.ok())
    KOLO_LOG(kError) << "operation " << context_.sequence << ": " << status.to_string();
  record(batch);  // before completing: a caller who then stops the timeline finds it there
  for (const std::string* name : batch.names) {
    auto it = pending->find(*name);
    if (it->second.handle) it->second.handle->stamp(HandleState::kTransported, transported);
    if (it->second.handle) complete_(it->second, status, transported);  // joined zeros have none
    pending->erase(it);
  }
}

Status Executor::settle_host(Family& family, Batch& batch, Status status,
                             std::unique_ptr<transport::Work>* work) {
  while (status.ok() && *work != nullptr) {
    status = (*work)->wait();
    if (!status.ok()) break;
    const std::unique_ptr<transport::Work> ended = std::move(*work);
    status = family.next(batch, work);
  }
  return status;
}

void Executor::complete_all(std::vector<TensorEntry>& entries, const Status& status) {
  const Clock::time_point now = Clock::now();
  for (TensorEntry& e : entries)
    if (e.handle) complete_(e, status, now);  // a joined rank's zero entries have none
}

void Executor::retire(InFlight& done) {
  Status status = done.work->wait();
  if (!status.ok()) KOLO_LOG(kError) << "operation failed: " << status.to_string();
  complete_all(done.entries, status);
}

bool Executor::poll() {
  bool any = false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (!it->work->test()) {
      ++it;
      continue;
    }
    retire(*it);
    it = in_flight_.erase(it);
    any = true;
  }
  return any;
}

void Executor::finish_all() {
  while (!in_flight_.empty()) {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    retire(f);
  }
}

// Host work has completed by now; device work has only been queued, so its time
// is the launch's.
void Executor::record(const Batch& batch) {
  if (timeline_ && timeline_->recording()) {
    timeline_->bucket(batch.names,
                      Timeline::BucketInfo{context_.sequence, op_.bytes, collective_name(op_.kind),
                                           context_.transport_name, op_.start,
                                           Timeline::Clock::now(), context_.deterministic});
  }
  context_.transport_name = "none";
  context_.deterministic = false;
  ++context_.sequence;
}

}  // namespace kolo::core
