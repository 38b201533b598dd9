#include "core/executor.h"

#include <cstring>

#include "common/check.h"
#include "common/logging.h"
#include "core/fusion_planner.h"
#include "reduce/reduce.h"

namespace kolo::core {
namespace {

// Tensors may share a bucket only when everything that shapes the reduction is
// equal; count is the one thing that may differ.
bool same_fusion_class(const TensorParams& a, const TensorParams& b) {
  return a.collective == b.collective && a.dtype == b.dtype && a.op == b.op &&
         a.device == b.device && a.prescale == b.prescale && a.postscale == b.postscale;
}

// Note [Large tensors skip the fusion buffer]
// Fusing saves a transport call per tensor but costs a copy in and a copy out of
// the fusion buffer — two passes over memory. For a small tensor the call's fixed
// cost (a few microseconds) dominates, so fusing wins; past about a megabyte the
// copies dominate and the tensor is reduced alone, straight from the caller's
// input into its output. Measured with kolo-allreduce-perf -m resnet50 -n 30 (2
// ranks, shm, 2026-11-22): fusing everything 33.0-33.7 ms per step; fusing
// nothing 25.0-27.1 ms; this rule (1 MiB and up alone) 22.0-24.8 ms; 64 KiB and
// up alone 22.3-22.5 ms, no better within the noise. Again after shm learnt to
// scale in cache (-n 20, three interleaved runs each, same session): 64 KiB
// 13.6-14.7 ms, 256 KiB 11.6-15.3 ms, 1 MiB 11.9-15.5 ms, 4 MiB 16.1-18.9 ms;
// between 64 KiB and 1 MiB the VM's noise is larger than any difference.
constexpr size_t kAloneBytes = size_t{1} << 20;

ReduceOp transport_op(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

// The factor applied to a float result: postscale, divided by size for AVERAGE.
double output_factor(const TensorParams& p, int world_size) {
  double f = p.postscale;
  if (p.op == ReduceOp::kAverage && is_floating(p.dtype)) f /= world_size;
  return f;
}

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
      device_(device) {}

void Executor::execute(const std::vector<Response>& responses,
                       std::map<std::string, TensorEntry>* pending) {
  std::vector<const Response*> allreduces, others;
  for (const Response& r : responses) {
    auto it = pending->find(r.name);
    if (r.code != Code::kOk) {
      if (it != pending->end()) {
        complete_(it->second, Status(r.code, r.message));
        pending->erase(it);
      }
      continue;
    }
    if (is_allreduce(r.params.collective)) {
      // No local entry: this rank has joined and contributes zeros (Note [Join]).
      if (it == pending->end()) pending->emplace(r.name, zero_entry(r));
      allreduces.push_back(&r);
    } else {
      KOLO_CHECK(it != pending->end());
      others.push_back(&r);
    }
  }
  run_allreduces(allreduces, pending);
  for (const Response* r : others) {
    auto it = pending->find(r->name);
    const auto start = Timeline::Clock::now();
    if (flight_) flight_->advance(it->second.flight, FlightRecorder::State::kExecuting, start);
    Status status = run_collective(it->second, *r);
    if (timeline_ && timeline_->enabled())
      timeline_->bucket({r->name}, sequence_, r->params.bytes(),
                        collective_name(r->params.collective), start, Timeline::Clock::now());
    ++sequence_;
    if (device_work_ != nullptr) {  // started on the device; completes in poll()
      std::vector<TensorEntry> moved;
      moved.push_back(std::move(it->second));
      pending->erase(it);
      launch(std::move(status), std::move(device_work_), std::move(moved));
      continue;
    }
    if (!status.ok()) KOLO_LOG(kError) << r->name << ": " << status.to_string();
    complete_(it->second, status);
    pending->erase(it);
  }
}

void Executor::launch(Status launched, std::unique_ptr<transport::Work> work,
                      std::vector<TensorEntry> entries) {
  if (launched.ok() && work == nullptr) launched = internal_error("device work was not started");
  if (!launched.ok()) {
    KOLO_LOG(kError) << "bucket " << sequence_ - 1 << ": " << launched.to_string();
    complete_all(entries, launched);
    return;
  }
  if (std::shared_ptr<transport::DeviceEvent> done = work->done_event())
    for (TensorEntry& e : entries)
      if (e.handle) e.handle->launched(done);
  in_flight_.push_back(InFlight{std::move(work), std::move(entries)});
}

void Executor::complete_all(std::vector<TensorEntry>& entries, const Status& status) {
  for (TensorEntry& e : entries)
    if (e.handle) complete_(e, status);  // a joined rank's zero entries have none
}

void Executor::retire(InFlight& done) {
  Status status = done.work->wait();
  if (!status.ok()) KOLO_LOG(kError) << "device work: " << status.to_string();
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

TensorEntry Executor::zero_entry(const Response& response) {
  const TensorParams& p = response.params;
  if (p.device == DeviceKind::kCuda) {  // the device transport makes its own zeros
    TensorEntry e;
    e.request.name = response.name;
    e.request.params = p;
    for (int64_t count : p.splits) e.members.push_back({nullptr, nullptr, count});
    return e;
  }
  const size_t bytes = p.bytes();
  if (zeros_.size() < bytes) zeros_.assign(bytes, 0);
  if (sink_.size() < bytes) sink_.resize(bytes);
  TensorEntry e;
  e.request.name = response.name;
  e.request.params = p;
  e.input = zeros_.data();
  e.output = sink_.data();
  // A group's members all read zeros and write into the sink; they may share it,
  // since nothing reads a joined rank's results.
  for (int64_t count : p.splits) e.members.push_back({zeros_.data(), sink_.data(), count});
  return e;  // no handle: completing it is a no-op
}

void Executor::run_allreduces(const std::vector<const Response*>& ok,
                              std::map<std::string, TensorEntry>* pending) {
  // Fusion classes in order of first appearance: a pure function of the list. A
  // group is a class of its own, so it is never mixed with other tensors.
  std::vector<const TensorParams*> classes;
  std::vector<PlanItem> items;
  items.reserve(ok.size());
  for (const Response* r : ok) {
    int cls = -1;
    const bool group = r->params.collective == Collective::kGroupedAllreduce;
    for (size_t c = 0; c < classes.size() && cls < 0 && !group; ++c)
      if (same_fusion_class(*classes[c], r->params)) cls = static_cast<int>(c);
    if (cls < 0) {
      cls = static_cast<int>(classes.size());
      classes.push_back(&r->params);
    }
    // A group, and a tensor large enough to skip the fusion buffer, is always a
    // bucket of its own: present it as "larger than the threshold".
    // See Note [Large tensors skip the fusion buffer].
    const bool alone = group || r->params.bytes() >= kAloneBytes;
    items.push_back(PlanItem{alone ? fusion_.size() + 1 : r->params.bytes(), cls});
  }

  for (const PlannedBucket& bucket : plan_buckets(items, fusion_.size())) {
    std::vector<TensorEntry*> entries;
    for (size_t i : bucket.items) entries.push_back(&pending->at(ok[i]->name));
    const TensorParams& params = ok[bucket.items[0]]->params;
    const auto start = Timeline::Clock::now();
    for (TensorEntry* e : entries)
      if (flight_) flight_->advance(e->flight, FlightRecorder::State::kExecuting, start);
    Status status;
    if (params.device == DeviceKind::kCuda) {
      std::unique_ptr<transport::Work> work = start_device_bucket(entries, params, &status);
      record_bucket(bucket, ok, params, start);
      std::vector<TensorEntry> moved;
      for (size_t i : bucket.items) {
        auto it = pending->find(ok[i]->name);
        moved.push_back(std::move(it->second));
        pending->erase(it);
      }
      launch(std::move(status), std::move(work), std::move(moved));
      continue;
    }
    if (params.collective == Collective::kGroupedAllreduce)
      status = run_group(*entries[0], params);
    else if (entries.size() == 1)
      status = run_alone(*entries[0], params);
    else
      status = run_fused(entries, params);
    if (!status.ok()) KOLO_LOG(kError) << "bucket " << sequence_ << ": " << status.to_string();
    record_bucket(bucket, ok, params, start);
    for (size_t i : bucket.items) {
      auto it = pending->find(ok[i]->name);
      if (it->second.handle) complete_(it->second, status);
      pending->erase(it);
    }
  }
}

// Records the bucket in the timeline and advances the sequence number.
void Executor::record_bucket(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                             const TensorParams& params, Timeline::Clock::time_point start) {
  if (timeline_ && timeline_->enabled()) {
    std::vector<std::string> names;
    size_t bytes = 0;  // not bucket.bytes: the planner saw a lone tensor as "over the threshold"
    for (size_t i : bucket.items) {
      names.push_back(ok[i]->name);
      bytes += ok[i]->params.bytes();
    }
    timeline_->bucket(names, sequence_, bytes, collective_name(params.collective), start,
                      Timeline::Clock::now());
  }
  ++sequence_;
}

// A device bucket goes to the transport whole: it packs, reduces, scales and
// unpacks on its stream (transport.h, BucketView). A joined rank's entries have no
// handle and contribute zeros (null pointers).
std::unique_ptr<transport::Work> Executor::start_device_bucket(
    const std::vector<TensorEntry*>& entries, const TensorParams& params, Status* status) {
  transport::BucketView view;
  view.dtype = params.dtype;
  view.op = params.op;
  view.prescale = params.prescale;
  view.postscale = params.postscale;
  view.sequence = sequence_;
  view.device = Device{DeviceKind::kCuda, -1, nullptr};
  for (TensorEntry* e : entries) {
    if (e->handle) view.device = Device{DeviceKind::kCuda, e->device.index, nullptr};
    if (!e->handle) {
      const bool group = !e->members.empty();
      for (const TensorEntry::Member& m : e->members) view.tensors.push_back({nullptr, nullptr, m.count, nullptr});
      if (!group) view.tensors.push_back({nullptr, nullptr, e->request.params.count, nullptr});
    } else if (!e->members.empty()) {
      for (const TensorEntry::Member& m : e->members)
        view.tensors.push_back({m.input, m.output, m.count, e->ready});
    } else {
      view.tensors.push_back({e->input, e->output, e->request.params.count, e->ready});
    }
  }
  for (const transport::BucketTensor& t : view.tensors) view.count += t.count;
  if (device_ == nullptr) {
    *status = unsupported("CUDA tensors need the NCCL transport");
    return nullptr;
  }
  if (view.device.index < 0) {
    *status = device_->resolve(&view.device);
    if (!status->ok()) return nullptr;
  }
  transport::Transport* transport = nullptr;
  *status = selector_.select(view, &transport);
  if (!status->ok()) return nullptr;
  return transport->allreduce(view);
}

transport::BucketView Executor::host_view(const TensorParams& params) const {
  transport::BucketView view;
  view.count = params.count;
  view.dtype = params.dtype;
  view.op = transport_op(params.op);
  view.device = Device{params.device, 0, nullptr};
  view.sequence = sequence_;
  return view;
}

// What a transport that scales_output() applies: see BucketView.
void Executor::hand_over_output_factor(const TensorParams& params,
                                       transport::BucketView* view) const {
  if (is_floating(params.dtype)) {
    view->postscale = output_factor(params, world_size_);
  } else if (params.op == ReduceOp::kAverage) {
    view->divide = world_size_;
  }
}

void Executor::finish_in_place(void* data, int64_t count, const TensorParams& params) {
  if (is_floating(params.dtype)) {
    double f = output_factor(params, world_size_);
    if (f != 1.0) reduce::scale(data, data, count, params.dtype, f);
  } else if (params.op == ReduceOp::kAverage) {
    reduce::divide_integer(data, count, params.dtype, world_size_);
  }
}

Status Executor::run_alone(TensorEntry& entry, const TensorParams& params) {
  transport::BucketView view = host_view(params);
  view.input = entry.input;
  view.output = entry.output;
  if (params.prescale != 1.0) {
    reduce::copy_scaled(entry.output, entry.input, params.count, params.dtype, params.prescale);
    view.input = entry.output;
  }
  if (view.count == 0) return Status::OK();
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector_.select(view, &transport));
  if (transport->scales_output()) hand_over_output_factor(params, &view);
  KOLO_RETURN_IF_ERROR(transport->allreduce(view)->wait());
  if (!transport->scales_output()) finish_in_place(entry.output, params.count, params);
  return Status::OK();
}

// A group is one bucket: packed into the fusion buffer when it fits; otherwise its
// members are reduced one after another, in order, still never mixed with others.
Status Executor::run_group(TensorEntry& entry, const TensorParams& params) {
  if (params.bytes() <= fusion_.size() && entry.members.size() > 1) {
    std::vector<TensorEntry> members(entry.members.size());
    std::vector<TensorEntry*> ptrs;
    for (size_t i = 0; i < members.size(); ++i) {
      members[i].input = entry.members[i].input;
      members[i].output = entry.members[i].output;
      members[i].request.params.count = entry.members[i].count;
      ptrs.push_back(&members[i]);
    }
    return run_fused(ptrs, params);
  }
  for (const TensorEntry::Member& m : entry.members) {
    TensorEntry one;
    one.input = m.input;
    one.output = m.output;
    TensorParams p = params;
    p.count = m.count;
    KOLO_RETURN_IF_ERROR(run_alone(one, p));
  }
  return Status::OK();
}

// Note [Fused buckets unpacked]
// Packing a fused bucket costs a copy of every tensor into the fusion buffer and
// one out again, on top of the transport's own passes: the ResNet-50 step's
// bucket of 131 small tensors (6.3 MB) took 1.2-1.3 ms at 2 ranks on shm, half
// the rate of a lone tensor (kolo's timeline). A transport that takes_tensors()
// (shm, hierarchical) reads each tensor's input and writes its output in place,
// slice by slice, as if they were one buffer; the fusion buffer is then used
// only for a prescale, and by transports that want one contiguous bucket. The
// transport is chosen once, from the bucket's total count, either way.
Status Executor::run_fused(const std::vector<TensorEntry*>& entries, const TensorParams& params) {
  transport::BucketView view = host_view(params);
  view.count = 0;
  for (const TensorEntry* e : entries) view.count += e->request.params.count;
  if (view.count == 0) return Status::OK();
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector_.select(view, &transport));
  if (params.prescale == 1.0 && transport->scales_output() && transport->takes_tensors()) {
    view.tensors.reserve(entries.size());
    for (const TensorEntry* e : entries)
      view.tensors.push_back({e->input, e->output, e->request.params.count, nullptr});
    hand_over_output_factor(params, &view);
    return transport->allreduce(view)->wait();
  }

  const size_t elem = dtype_size(params.dtype);
  char* buffer = fusion_.data();
  KOLO_CHECK_LE(view.bytes(), fusion_.size());
  int64_t offset = 0;
  for (TensorEntry* e : entries) {
    const int64_t n = e->request.params.count;
    reduce::copy_scaled(buffer + offset * elem, e->input, n, params.dtype, params.prescale);
    offset += n;
  }
  view.input = buffer;
  view.output = buffer;
  KOLO_RETURN_IF_ERROR(transport->allreduce(view)->wait());

  const bool integer_average = !is_floating(params.dtype) && params.op == ReduceOp::kAverage;
  const double factor = is_floating(params.dtype) ? output_factor(params, world_size_) : 1.0;
  offset = 0;
  for (TensorEntry* e : entries) {
    const int64_t n = e->request.params.count;
    reduce::copy_scaled(e->output, buffer + offset * elem, n, params.dtype, factor);
    if (integer_average) reduce::divide_integer(e->output, n, params.dtype, world_size_);
    offset += n;
  }
  return Status::OK();
}

}  // namespace kolo::core
