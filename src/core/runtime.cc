#include "core/runtime.h"

#include "common/check.h"
#include "common/logging.h"
#include "common/failpoint.h"
#include "core/collective_args.h"
#include "core/init_agreement.h"
#include "transport/registry.h"

namespace kolo::core {

Runtime::Runtime(transport::World world, const Config& config, int32_t set_id)
    : world_(std::move(world)),
      config_(config),
      topology_(world_.control->topology()),
      timeline_(topology_.rank),
      set_id_(set_id) {
  if (set_id_ == 0)
    sets_ = std::make_unique<ProcessSets>(*this, std::move(world_.make_subset), config_,
                                          topology_.rank, topology_.size);
  world_.make_subset = nullptr;
}

Status Runtime::start(transport::World world, const Config& config, std::unique_ptr<Runtime>* out) {
  log::set_level(config.log_level);
  log::set_rank(world.control->topology().rank);
  return launch(std::unique_ptr<Runtime>(new Runtime(std::move(world), config, 0)), out);
}

Status Runtime::start_set(transport::World world, const Config& config, int32_t id,
                          std::unique_ptr<Runtime>* out) {
  return launch(std::unique_ptr<Runtime>(new Runtime(std::move(world), config, id)), out);
}

Status Runtime::launch(std::unique_ptr<Runtime> rt, std::unique_ptr<Runtime>* out) {
  rt->coordinator_ = std::make_unique<Coordinator>(rt->world_, rt->config_, rt->queue_,
                                                   rt->shutdown_requested_, rt->timeline_);
  rt->autotune_record_ = rt->coordinator_->autotune_record();
  rt->waits_ = rt->coordinator_->wait_policy();
  rt->helper_ = rt->coordinator_->helper();
  // Every rank's status, before any coordinator runs: all start or none (Note [One
  // verdict at init]); those that fail release the world together.
  KOLO_RETURN_IF_ERROR_AS_IS(
      agree_at_init(*rt->world_.control, rt->coordinator_->init(), Fingerprint{}));
  rt->running_.store(true, std::memory_order_release);
  Runtime* raw = rt.get();
  rt->thread_ = std::thread([raw] {
    raw->coordinator_->run();
    raw->running_.store(false, std::memory_order_release);
    // The global set's stop (this rank's shutdown, another's, or a failure) stops
    // every process set here too, so that no set outlives kolo on this rank.
    if (raw->sets_) raw->sets_->shutdown();
    raw->release_world();
  });
  *out = std::move(rt);
  return Status::OK();
}

Runtime::~Runtime() { shutdown(); }

void Runtime::release_world() {
  coordinator_.reset();
  queue_.set_waker(nullptr);  // it rings the control plane, which goes below
  failpoint("teardown");
  // See Note [Shutdown without waiting for the others].
  if (Status s = world_.control->barrier(); !s.ok())
    KOLO_LOG(kWarning) << "shutdown: not every rank reached the teardown (" << s.message()
                       << "); what is shared with them is left to the process's exit";
  std::lock_guard<std::mutex> lock(device_mu_);
  world_.release_transports();
}

Status Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (!running())
    return Status(Code::kShutdown, "kolo is not running (shut down by another rank, or stopped "
                                   "by a failure): nothing to record");
  return timeline_.start(path, mark_cycles);
}

Status Runtime::stop_timeline() { return timeline_.stop(); }

Status Runtime::stream_wait(HandleState& handle, void* stream) {
  std::lock_guard<std::mutex> lock(device_mu_);
  if (!handle.on_device || world_.device_support == nullptr)
    return invalid_argument("kolo_handle_stream_wait: the handle is not a CUDA operation");
  std::shared_ptr<transport::DeviceEvent> done = handle.wait_launched();
  if (done == nullptr) {  // completed without device work queued: it failed (or had none)
    return handle.code() == Code::kOk ? Status::OK() : Status(handle.code(), handle.message());
  }
  return world_.device_support->stream_wait(*done, stream);
}

Status Runtime::submit(CollectiveArgs args, std::shared_ptr<HandleState>* handle) {
  return enter(std::move(args), handle, /*blocking=*/false);
}

Status Runtime::run(CollectiveArgs args, std::shared_ptr<HandleState>* handle) {
  return enter(std::move(args), handle, /*blocking=*/true);
}

Status Runtime::enter(CollectiveArgs args, std::shared_ptr<HandleState>* handle, bool blocking) {
  if (config_.deterministic) args.deterministic = true;  // KOLO_DETERMINISTIC
  if (args.process_set != 0) {
    if (sets_ == nullptr) return internal_error("a process set's runtime has no process sets");
    std::shared_ptr<const ProcessSet> set;
    KOLO_RETURN_IF_ERROR_AS_IS(sets_->find(args.process_set, &set));
    const std::string which = "process set " + std::to_string(args.process_set);
    if (set->runtime == nullptr)
      return invalid_argument(which + " does not include rank " + std::to_string(topology_.rank));
    if (args.collective == Collective::kBroadcast) {
      const int root = set->rank_of(args.root);
      if (root < 0)
        return invalid_argument("tensor '" + args.name + "': broadcast root " +
                                std::to_string(args.root) + " is not a rank of " + which);
      args.root = root;
    }
    args.process_set = 0;
    return set->runtime->enter(std::move(args), handle, blocking);
  }
  if (args.collective == Collective::kBarrier && args.name.empty()) args.name = next_barrier_name();
  std::unique_lock<std::mutex> device_lock(device_mu_, std::defer_lock);
  if (args.device.kind == DeviceKind::kCuda) {
    device_lock.lock();
    if (!running()) return Status(Code::kShutdown, "kolo has stopped on this rank");
    const std::string prefix = "tensor '" + args.name + "': ";
    if (world_.device_support == nullptr) return unsupported(prefix + "CUDA memory needs " + transport::device_transport_missing());
    if (Status s = world_.device_support->resolve(&args.device); !s.ok())
      return Status(s.code(), prefix + s.message());
  }
  TensorEntry entry;
  // Caller mistakes go back as they are, without file:line: they are the user's message.
  if (Status s = make_entry(std::move(args), topology_, &entry); !s.ok()) return s;
  if (entry.device.kind == DeviceKind::kCuda) {
    // Note [Device streams]: the inputs are ready after what the caller's stream
    // holds now, whenever the coordinator gets to them.
    if (Status s = world_.device_support->record_ready(entry.device, &entry.ready); !s.ok())
      return Status(s.code(), "tensor '" + entry.request.name + "': " + s.message());
  }
  const bool on_device = entry.device.kind == DeviceKind::kCuda;
  const bool helps = waits_.waiter_runs_cycle(on_device);
  std::shared_ptr<HandleState> h;
  auto make_handle = [&](TensorEntry& e) {
    e.handle = std::make_shared<HandleState>();
    e.handle->on_device = on_device;
    e.handle->waits = &waits_.profile(on_device ? WaitFor::kDeviceHandle : WaitFor::kHostHandle);
    if (helps) e.handle->helper = helper_;
    e.handle->stamp(HandleState::kSubmitted, e.enqueued);
    h = e.handle;
  };
  // Note [A blocking call enters the cycle] (coordinator_gate.h), and Note [A
  // call alone] (coordinator.h): a call that may run the cycle here reads the
  // clock when it needs to (once, if it completes alone).
  if (!blocking || !helps) entry.enqueued = Clock::now();
  Status refused;
  bool alone = false;
  if (blocking && helps &&
      helper_->run_here(entry, Clock::time_point::max(),
                        [&make_handle](TensorEntry& e) { make_handle(e); },  // no allocation
                        &refused, &alone)) {
    if (!refused.ok()) return refused;
    if (alone) {  // its handle, if it needed one, is done
      *handle = std::move(h);
      return Status::OK();
    }
  } else {
    if (entry.enqueued == Clock::time_point{}) entry.enqueued = Clock::now();
    make_handle(entry);
    if (Status s = queue_.push(std::move(entry)); !s.ok()) return s;
  }
  if (blocking) {
    if (device_lock.owns_lock()) device_lock.unlock();  // release_world() takes it
    h->wait(-1.0);
  }
  *handle = std::move(h);
  return Status::OK();
}

void Runtime::shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (sets_) sets_->shutdown();  // each set's members stop it together
  if (!thread_.joinable()) return;
  shutdown_requested_.store(true, std::memory_order_release);
  queue_.wake();
  thread_.join();
}

}  // namespace kolo::core
