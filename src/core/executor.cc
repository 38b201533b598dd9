#include "core/executor.h"

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "core/fusion_planner.h"
#include "transport/reduction.h"

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
                   transport::DeviceSupport* device)
    : selector_(selector),
      fusion_(fusion),
      rank_(rank),
      world_size_(world_size),
      complete_(std::move(complete)),
      timeline_(timeline),
      threshold_(fusion.size()),
      alone_bytes_(size_t{1} << 20),
      device_(device) {}

void Executor::set_sizes(size_t fusion_threshold, size_t large_tensor_bytes) {
  threshold_ = std::min(fusion_threshold, fusion_.size());
  alone_bytes_ = large_tensor_bytes;
}

void Executor::execute(const std::vector<Response>& responses,
                       Pending* pending,
                       const std::vector<const char*>* carried) {
  std::vector<const Response*>& ok = ok_;
  std::vector<const Response*>& joined = joined_;
  ok.clear();
  joined.clear();
  for (const Response& r : responses) {
    auto it = pending->find(r.name);
    if (r.code != Code::kOk) {
      if (it != pending->end()) {
        complete_(it->second, Status(r.code, r.message));
        pending->erase(it);
      }
      continue;
    }
    if (it == pending->end()) {
      KOLO_CHECK(is_allreduce(r.params.collective));
      joined.push_back(&r);  // Note [Join] in negotiator.h
    }
    ok.push_back(&r);
  }
  Status zeros = add_zero_entries(joined, pending);
  if (!zeros.ok()) KOLO_LOG(kError) << "joined rank's zeros: " << zeros.to_string();
  plan_cycle(ok, world_size_, threshold_, alone_bytes_, &plan_scratch_, &plan_);
  const std::vector<PlannedBucket>& plan = plan_;
  // The packer made this very plan from this very list: one bucket.
  KOLO_CHECK(carried == nullptr || (plan.size() == 1 && joined.empty()));
  carried_ = carried;
  for (const PlannedBucket& bucket : plan)
    if (is_allreduce(ok[bucket.items[0]]->params.collective)) run_allreduce(bucket, ok, pending);
  for (const PlannedBucket& bucket : plan)
    if (!is_allreduce(ok[bucket.items[0]]->params.collective)) run_collective(bucket, ok, pending);
  carried_ = nullptr;
}

void Executor::launch(Status started, std::unique_ptr<transport::Work> work, DeviceKind where,
                      Pending* pending) {
  // Host work, or nothing started: settled now, completed in place in `pending`.
  // See Note [One execution model].
  if (!started.ok() || work == nullptr || where == DeviceKind::kCpu) {
    Status status = !started.ok() ? started : work ? work->wait() : Status::OK();
    const auto transported = Timeline::Clock::now();
    if (!status.ok()) KOLO_LOG(kError) << "operation " << sequence_ << ": " << status.to_string();
    record();  // before completing: a caller who then stops the timeline finds it there
    for (const std::string* name : names_) {
      auto it = pending->find(*name);
      if (it->second.handle) it->second.handle->stamp(HandleState::kTransported, transported);
      if (it->second.handle) complete_(it->second, status);  // joined zeros have none
      pending->erase(it);
    }
    return;
  }
  record();
  InFlight f{std::move(work), {}};
  for (const std::string* name : names_) {
    auto it = pending->find(*name);
    f.entries.push_back(std::move(it->second));
    pending->erase(it);
  }
  if (std::shared_ptr<transport::DeviceEvent> done = f.work->done_event())
    for (TensorEntry& e : f.entries)
      if (e.handle) e.handle->launched(done);
  in_flight_.push_back(std::move(f));
}

void Executor::complete_all(std::vector<TensorEntry>& entries, const Status& status) {
  for (TensorEntry& e : entries)
    if (e.handle) complete_(e, status);  // a joined rank's zero entries have none
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

// The host buffers are sized for the largest joined tensor before any entry
// points into them: growing them later in the cycle would move memory that
// earlier entries of the same cycle still point at. A group's members all read
// zeros and write into the sink; nothing reads a joined rank's results.
Status Executor::add_zero_entries(const std::vector<const Response*>& joined,
                                  Pending* pending) {
  size_t host_bytes = 0;
  for (const Response* r : joined)
    if (r->params.device == DeviceKind::kCpu) host_bytes = std::max(host_bytes, r->params.bytes());
  if (zeros_.size() < host_bytes) zeros_.assign(host_bytes, 0);
  if (sink_.size() < host_bytes) sink_.resize(host_bytes);
  Status status;
  for (const Response* r : joined) {
    const TensorParams& p = r->params;
    TensorEntry e;  // no handle: completing it is a no-op
    e.request.name = r->name;
    e.request.params = p;
    e.device = Device{p.device, -1, nullptr};
    e.input = zeros_.data();
    e.output = sink_.data();
    if (p.device != DeviceKind::kCpu) {
      Status s = device_ == nullptr ? unsupported("CUDA tensors need the NCCL transport")
                                    : device_->resolve(&e.device);
      if (s.ok()) s = device_->allocate_zeros(e.device, 2 * std::max<size_t>(p.bytes(), 1), &e.zeros);
      if (!s.ok()) {
        status = s.with_context(r->name);
        continue;
      }
      e.input = e.zeros.get();
      e.output = e.zeros.get() + std::max<size_t>(p.bytes(), 1);
    }
    const bool group = p.collective == Collective::kGroupedAllreduce;
    if (group)
      for (int64_t count : p.member_counts) e.members.push_back({e.input, e.output, count});
    pending->emplace(r->name, std::move(e));
  }
  return status;
}

void Executor::run_allreduce(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                             Pending* pending) {
  entries_.clear();
  names_.clear();
  size_t bytes = 0;
  for (size_t i : bucket.items) {
    auto it = pending->find(ok[i]->name);
    if (it == pending->end()) continue;  // a joined rank's entry that could not be made
    entries_.push_back(&it->second);
    names_.push_back(&ok[i]->name);
    bytes += ok[i]->params.bytes();
  }
  const TensorParams& params = ok[bucket.items[0]]->params;
  const auto start = Timeline::Clock::now();
  for (TensorEntry* e : entries_) {
    if (flight_) flight_->advance(e->flight, FlightRecorder::State::kExecuting, start);
    if (e->handle) e->handle->stamp(HandleState::kExecuting, start);
  }
  Status started;
  std::unique_ptr<transport::Work> work;
  if (carried_ != nullptr)
    started = reduce_carried(entries_, params);
  else
    work = start_bucket(entries_, params, &started);
  op_ = Op{bytes, params.collective, start};
  launch(std::move(started), std::move(work), params.device, pending);
  allreduced_bytes_ += bytes;
}

Status Executor::describe_bucket(const std::vector<TensorEntry*>& entries,
                                 const TensorParams& params, transport::Bucket* b) {
  b->dtype = params.dtype;
  b->reduction = transport::decide_reduction(params.op, params.dtype, params.prescale,
                                             params.postscale, world_size_);
  b->sequence = sequence_;
  b->device = Device{params.device, params.device == DeviceKind::kCpu ? 0 : -1, nullptr};
  for (const TensorEntry* e : entries) {
    if (params.device != DeviceKind::kCpu && e->device.index >= 0) b->device.index = e->device.index;
    if (e->members.empty()) {
      b->tensors.push_back({e->input, e->output, e->request.params.count, e->ready});
      continue;
    }
    for (const TensorEntry::Member& m : e->members)
      b->tensors.push_back({m.input, m.output, m.count, e->ready});
  }
  for (const transport::BucketTensor& t : b->tensors) b->count += t.count;
  if (params.device == DeviceKind::kCpu) {
    b->staging = fusion_.data();
    b->staging_bytes = fusion_.size();
    return Status::OK();
  }
  if (device_ == nullptr) return unsupported("CUDA tensors need the NCCL transport");
  return b->device.index < 0 ? device_->resolve(&b->device) : Status::OK();
}

std::unique_ptr<transport::Work> Executor::start_bucket(const std::vector<TensorEntry*>& entries,
                                                        const TensorParams& params,
                                                        Status* status) {
  // One Bucket, reused: its tensor list keeps its capacity between buckets.
  bucket_.tensors.clear();
  bucket_.count = 0;
  *status = describe_bucket(entries, params, &bucket_);
  if (!status->ok() || bucket_.count == 0) return nullptr;
  transport::Transport* transport = nullptr;
  *status = selector_.select(bucket_, &transport);
  if (!status->ok()) return nullptr;
  transport_name_ = transport->name();
  return transport->allreduce(bucket_);
}

// Host work has completed by now; device work has only been queued, so its time
// is the launch's.
void Executor::record() {
  if (timeline_ && timeline_->recording()) {
    timeline_->bucket(names_, Timeline::BucketInfo{sequence_, op_.bytes, collective_name(op_.kind),
                                                   transport_name_, op_.start,
                                                   Timeline::Clock::now()});
  }
  transport_name_ = "none";
  ++sequence_;
}

}  // namespace kolo::core
