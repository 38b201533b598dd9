#include "core/coordinator.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::core {
namespace {

std::vector<transport::Transport*> offered(transport::World& world) {
  std::vector<transport::Transport*> out;
  for (auto& t : world.transports) out.push_back(t.get());
  return out;
}

// See Note [Waking up]: poll this long before sleeping.
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kMinSleep = std::chrono::microseconds(10);

}  // namespace

Coordinator::Coordinator(transport::World& world, const Config& config, TensorQueue& queue,
                         const std::atomic<bool>& shutdown_requested)
    : world_(world),
      config_(config),
      queue_(queue),
      shutdown_requested_(shutdown_requested),
      selector_(offered(world), config.transport, world.control->topology()),
      fusion_(static_cast<size_t>(config.fusion_threshold_bytes)),
      negotiator_(*world.control, config),
      executor_(selector_, fusion_, world.control->topology().rank, world.control->topology().size,
                [this](TensorEntry& e, Status s) { complete(e, std::move(s)); }, &timeline_) {}

Status Coordinator::init() {
  KOLO_RETURN_IF_ERROR(selector_.validate());
  if (world_.control->topology().rank == 0) KOLO_RETURN_IF_ERROR(timeline_.open(config_.timeline_path));
  return Status::OK();
}

void Coordinator::complete(TensorEntry& entry, Status status) {
  // Forget the name first: a caller who waits and resubmits it at once must not
  // be refused as a duplicate.
  queue_.finish(entry.request.name);
  entry.handle->complete(std::move(status));
}

void Coordinator::run() {
  if (config_.thread_affinity >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(config_.thread_affinity, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
      KOLO_LOG(kWarning) << "could not pin the coordinator to core " << config_.thread_affinity;
  }
  std::vector<Response> ready;
  while (true) {
    wait_for_news();
    for (TensorEntry& e : queue_.drain()) {
      timeline_.negotiate_start(e.request.name);
      negotiator_.add(e.request, e.enqueued);
      std::string name = e.request.name;
      pending_.emplace(std::move(name), std::move(e));
    }
    const bool asked = shutdown_requested_.load(std::memory_order_acquire);
    bool stop = false;
    Status status = negotiator_.cycle(asked, &ready, &stop);
    if (!status.ok()) {
      KOLO_LOG(kError) << "negotiation failed, stopping: " << status.to_string();
      fail_everything(Status(Code::kTransport, "kolo's control plane failed: " + status.message()));
      return;
    }
    for (const Response& r : ready) timeline_.negotiate_end(r.name);
    executor_.execute(ready, &pending_);
    if (stop) {
      fail_everything(Status(Code::kShutdown, asked ? "kolo was shut down on this rank"
                                                    : "kolo was shut down by another rank"));
      return;
    }
  }
}

void Coordinator::wait_for_news() {
  using std::chrono::duration_cast;
  const auto idle_start = Clock::now();
  const auto max_sleep = std::max<Clock::duration>(
      kMinSleep, duration_cast<Clock::duration>(
                     std::chrono::duration<double, std::milli>(config_.cycle_time_ms)));
  const uint64_t next = negotiator_.cycles();
  while (true) {
    if (queue_.has_queued() || shutdown_requested_.load(std::memory_order_acquire) ||
        world_.control->rung(next))
      return;
    const auto now = Clock::now();
    if (negotiator_.has_news(now)) return;
    negotiator_.warn_stalls(now);
    const auto idle = now - idle_start;
    if (idle < kSpinFor) {
      sched_yield();
      continue;
    }
    const auto sleep = std::clamp<Clock::duration>(idle / 8, kMinSleep, max_sleep);
    queue_.wait_until(now + sleep);
  }
}

void Coordinator::fail_everything(const Status& status) {
  timeline_.close();
  for (TensorEntry& e : queue_.close(status)) e.handle->complete(status);
  for (auto& [name, e] : pending_) complete(e, status);
  pending_.clear();
}

}  // namespace kolo::core
