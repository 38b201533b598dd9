#include "core/coordinator.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "core/peer_failure.h"
#include "core/straggler.h"

namespace kolo::core {
namespace {

std::vector<transport::Transport*> offered(transport::World& world) {
  std::vector<transport::Transport*> out;
  for (auto& t : world.transports) out.push_back(t.get());
  return out;
}

// Note [A call alone]: the collectives besides the allreduce that may ride with
// the AND alone (Executor::pack_alone decides whether they do).
bool rides_alone(Collective c) {
  return c == Collective::kAllgather || c == Collective::kBroadcast ||
         c == Collective::kAlltoall || c == Collective::kReducescatter;
}

// Those whose output kolo allocates on the handle: a blocking one going alone
// needs its handle before it runs.
bool output_on_handle(const TensorParams& p) {
  return (p.collective == Collective::kAllgather && !p.into) || p.collective == Collective::kAlltoall;
}

}  // namespace

Coordinator::Coordinator(transport::World& world, const Config& config, TensorQueue& queue,
                         const std::atomic<bool>& shutdown_requested, Timeline& timeline)
    : world_(world),
      config_(config),
      queue_(queue),
      shutdown_requested_(shutdown_requested),
      selector_(offered(world),
                transport::SelectorOptions{config.transport, config.select,
                                           config.hierarchical_allreduce, "auto", "auto"},
                world.control->topology()),
      fusion_(fusion_capacity(config)),
      timeline_(timeline),
      negotiator_(*world.control, config),
      executor_(selector_, fusion_, world.control->topology().rank, world.control->topology().size,
                [this](TensorEntry& e, Status s, Clock::time_point at) {
                  complete(e, std::move(s), at);
                },
                &timeline_,
                world.device_support, world.host_outputs),
      flight_(static_cast<size_t>(config.flight_recorder)),
      // See Note [The waiter runs the cycle]: on one node the idle checks make no
      // foreign calls, so a cycle may run on any thread that holds the gate.
      policy_(WaitPolicy::for_node(
          world.control->topology().local_size,
          world.control->topology().local_size == world.control->topology().size)),
      gate_(std::make_shared<CycleGate>(this, policy_)),
      doze_(policy_.profile(WaitFor::kDoze)),
      alone_allowed_(config.and_carry_bytes > 0 && !config.autotune) {}

Status Coordinator::init() {
  transport::ControlPlane* control = world_.control.get();
  queue_.set_waker([control] { control->wake(); });
  for (auto& t : world_.transports) t->set_completion_waker([control] { control->wake(); });
  KOLO_RETURN_IF_ERROR(selector_.validate());
  // Note [Data rides with the AND] (negotiator.h).
  executor_.set_carry_bytes(static_cast<size_t>(config_.and_carry_bytes));
  if (config_.and_carry_bytes > 0) {
    negotiator_.set_packer(
        [this](const std::vector<const Response*>& ahead, char* slot, size_t capacity) {
          return executor_.pack_ahead(ahead, &pending_, slot, capacity);
        });
  }
  KOLO_RETURN_IF_ERROR(init_autotune());
  init_flight_recorder();
  if (!config_.timeline_path.empty()) {
    Status s = timeline_.start(config_.timeline_path, config_.timeline_mark_cycles);
    if (!s.ok()) return Status(s.code(), "KOLO_TIMELINE: " + s.message());
  }
  return Status::OK();
}

void Coordinator::complete(TensorEntry& entry, Status status, Clock::time_point at) {
  if (!status.where().empty())
    KOLO_LOG(kDebug) << entry.request.name << ": " << status.debug_string();
  // Forget the name first: a caller who waits and resubmits it at once must not
  // be refused as a duplicate.
  queue_.finish(entry.request.name);
  flight_.finish(entry.flight, status.code(), at);
  entry.handle->complete(std::move(status), at);
}

void Coordinator::run() {
  if (config_.thread_affinity >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(config_.thread_affinity, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
      KOLO_LOG(kWarning) << "could not pin the coordinator to core " << config_.thread_affinity;
  }
  std::unique_lock<std::mutex> lock(gate_->mu(), std::defer_lock);
  run_cycles(lock);
  gate_->detach();
}

void Coordinator::run_cycles(std::unique_lock<std::mutex>& lock) {
  while (true) {
    if (Status s = wait_for_news(lock); !s.ok()) return stop_for(s);
    if (!ended_) run_cycle();
    if (ended_) return finish();
  }
}

Coordinator::Helped Coordinator::help_once() {
  if (ended_) return Helped::kEnded;
  if (!has_news_now(negotiator_.cycles())) return Helped::kIdle;
  return cycle_for_helper();
}

Coordinator::Helped Coordinator::run_with(TensorEntry& entry, Status* refused) {
  *refused = queue_.admit(entry.request.name);
  if (!refused->ok()) return Helped::kIdle;
  track(entry);  // if kolo has ended, finish() fails it with the rest
  return cycle_for_helper(entry.enqueued);  // read just now: the cycle starts with it
}

Coordinator::Helped Coordinator::cycle_for_helper(Clock::time_point start) {
  if (!ended_) run_cycle(start);
  return helped_cycle();
}

Coordinator::Helped Coordinator::helped_cycle() {
  if (!ended_) return Helped::kRan;
  world_.control->wake();  // the coordinator thread finishes
  return Helped::kEnded;
}

// Note [A call alone]
bool Coordinator::may_go_alone(const TensorEntry& entry, uint32_t* bit) const {
  const Request& request = entry.request;
  return !ended_ && alone_allowed_ && pending_.empty() && !executor_.busy() &&
         !timeline_.recording() && !shutdown_requested_.load(std::memory_order_acquire) &&
         request.params.device_kind == DeviceKind::kCpu && entry.members.empty() &&
         (request.params.collective == Collective::kAllreduce
              ? request.params.bytes() <= static_cast<size_t>(config_.and_carry_bytes)
              : rides_alone(request.params.collective)) &&
         negotiator_.alone(request, bit);
}

bool Coordinator::go_alone(TensorEntry& entry, uint32_t bit, Clock::time_point start,
                           const HandleMaker* make_handle) {
  const Request& request = entry.request;
  // A call alone comes with its handle (a cycle's drain) or with the means to
  // make one (a blocking call): see run_alone().
  KOLO_CHECK(entry.handle != nullptr || make_handle != nullptr);
  auto give_handle = [&] {
    if (entry.enqueued == Clock::time_point{}) entry.enqueued = Clock::now();
    (*make_handle)(entry);
  };
  if (entry.handle == nullptr && output_on_handle(request.params)) give_handle();
  bool done = false;
  bool stop = false;
  Status status = negotiator_.cycle_alone(
      request, bit, entry.enqueued,
      [this, &entry, bit](char* slot, size_t capacity) {
        return executor_.pack_alone(entry, negotiator_.cached(bit), slot, capacity);
      },
      &done, &ready_, &stop);
  if (done) {
    take_carried();
    Status outcome;  // an allreduce's cannot fail once every part is here
    if (request.params.collective == Collective::kAllreduce)
      executor_.finish_alone(carried_);
    else
      outcome = executor_.run_alone(entry, negotiator_.cached(bit), carried_);
    queue_.finish(request.name);
    const Clock::time_point now = Clock::now();  // the end of every phase after the cycle's start
    if (entry.enqueued == Clock::time_point{}) entry.enqueued = now;  // a blocking call's
    last_submission_ = std::max(last_submission_, entry.enqueued);
    if (outcome.ok() && flight_.enabled()) flight_.completed(request, entry.enqueued, now);
    if (!outcome.ok()) {
      flight_.finish(flight_.submitted(request, entry.enqueued), outcome.code(), now);
      if (entry.handle == nullptr) give_handle();  // the blocking call's outcome rides on it
    }
    if (entry.handle != nullptr) {
      entry.handle->stamp(HandleState::kCycleStarted, std::max(start, entry.enqueued));
      for (auto phase : {HandleState::kNegotiated, HandleState::kExecuting, HandleState::kTransported})
        entry.handle->stamp(phase, now);
      entry.handle->complete(std::move(outcome), now);
    }
    return true;
  }
  // The cycle goes on as any other: the entry joins it as track() would (the
  // negotiator has it already), with the handle its caller then waits for.
  if (entry.enqueued == Clock::time_point{}) entry.enqueued = Clock::now();
  if (start == Clock::time_point{}) start = entry.enqueued;
  last_submission_ = std::max(last_submission_, entry.enqueued);
  if (entry.handle == nullptr) (*make_handle)(entry);
  entry.flight = flight_.submitted(entry.request, entry.enqueued);
  pending_.emplace(entry.request.name, std::move(entry));
  finish_cycle(std::move(status), start, /*asked=*/false, stop, /*carried=*/false);
  return false;
}

Coordinator::Helped Coordinator::run_alone(TensorEntry& entry, const HandleMaker& make_handle,
                                           Status* result) {
  uint32_t bit = 0;
  if (queue_.has_queued() || !may_go_alone(entry, &bit)) return Helped::kNotAlone;
  *result = queue_.admit(entry.request.name);
  if (!result->ok()) return Helped::kIdle;
  if (go_alone(entry, bit, entry.enqueued, &make_handle)) return Helped::kAlone;
  return helped_cycle();
}

void Coordinator::finish() {
  if (end_failed_) return stop_for(end_);
  fail_everything(end_);
}

void Coordinator::track(TensorEntry& e) {
  negotiator_.add(e.request, e.enqueued);
  e.flight = flight_.submitted(e.request, e.enqueued);
  last_submission_ = std::max(last_submission_, e.enqueued);
  pending_.emplace(e.request.name, std::move(e));
}

void Coordinator::run_cycle(Clock::time_point start) {
  queue_.drain(&drained_);
  uint32_t bit = 0;
  if (drained_.size() == 1 && may_go_alone(drained_[0], &bit)) {  // Note [A call alone]
    go_alone(drained_[0], bit, start == Clock::time_point{} ? Clock::now() : start, nullptr);
    drained_.clear();
    return;
  }
  for (TensorEntry& e : drained_) track(e);
  drained_.clear();
  const bool asked = shutdown_requested_.load(std::memory_order_acquire);
  bool stop = false;
  const bool recording = timeline_.recording();
  const Clock::time_point cycle_start = start == Clock::time_point{} ? Clock::now() : start;
  negotiator_.set_recording(recording);
  bool carried = false;
  Status status = negotiator_.cycle(asked, cycle_start, &ready_, &stop, &carried);
  finish_cycle(std::move(status), cycle_start, asked, stop, carried);
}

void Coordinator::take_carried() {
  carried_.resize(static_cast<size_t>(world_.control->topology().size));
  for (size_t r = 0; r < carried_.size(); ++r)
    carried_[r] = world_.control->carried(static_cast<int>(r));
}

void Coordinator::fail_cycle(Status status) {
  ended_ = end_failed_ = true;
  end_ = std::move(status);
}

void Coordinator::finish_cycle(Status status, Clock::time_point cycle_start, bool asked,
                               bool stop, bool carried) {
  if (!status.ok()) return fail_cycle(std::move(status));
  if (carried) take_carried();  // Note [Data rides with the AND]
  // Before the work completes the names: a caller who then stops the timeline
  // finds them in it. (This delays results by one allgather while recording.)
  if (negotiator_.someone_recording()) {
    note_submits(ready_);
    if (Status s = record_cycle(ready_, cycle_start); !s.ok()) return fail_cycle(std::move(s));
  }
  // One read for the negotiation's end and the first bucket's start.
  const Clock::time_point negotiated = ready_.empty() ? Clock::time_point{} : Clock::now();
  record_negotiated(ready_, cycle_start, negotiated);
  take_announced_setting();  // before this cycle's buckets: Note [Announcements]
  executor_.execute(ready_, &pending_, carried ? &carried_ : nullptr, negotiated);
  tune_after_cycle();
  if (negotiator_.take_stall_report()) dump_flight_recorder("stall");
  if (stop) {
    ended_ = true;
    end_ = Status(Code::kShutdown, asked ? "kolo was shut down on this rank"
                                         : "kolo was shut down by another rank");
    return;
  }
  // A transport may have met the failure first (its buckets carry it).
  if (Status s = world_.control->check_peers(); !s.ok()) return fail_cycle(std::move(s));
}

// See Note [Who came last] in timeline.h: this rank's submit of each ready name.
void Coordinator::note_submits(const std::vector<Response>& ready) {
  ready_at_ = Clock::now();
  submit_ages_.assign(ready.size(), -1);
  submitted_.assign(ready.size(), Clock::time_point{});
  for (size_t i = 0; i < ready.size(); ++i) {
    auto it = pending_.find(ready[i].name);
    if (it == pending_.end()) continue;  // a joined rank's
    submitted_[i] = it->second.enqueued;
    submit_ages_[i] = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::microseconds>(ready_at_ - submitted_[i]).count());
  }
}

// Every rank takes part while some rank records; only a recording rank writes.
Status Coordinator::record_cycle(const std::vector<Response>& ready, Clock::time_point start) {
  KOLO_RETURN_IF_ERROR(exchange_stragglers(*world_.control, submit_ages_, &stragglers_));
  if (!timeline_.recording()) return Status::OK();
  timeline_.cycle(negotiator_.cycles() - 1, ready.size(), start);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (submit_ages_[i] < 0) continue;
    timeline_.negotiated(ready[i].name, collective_name(ready[i].params.collective),
                         submitted_[i], ready_at_, stragglers_[i]);
  }
  return Status::OK();
}

// Note [A broken cycle waits for liveness's verdict]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cycle that fails with anything but a liveness verdict (an MPI error, an AND
// whose lengths disagree) is first held while liveness is asked, for up to the
// peer timeout and one second more. Across hosts the world's data can go bad
// before a verdict is possible: with one host's egress dropped, its peer gives up
// at the timeout and exits, MPICH over UCX then completes this rank's pending AND
// with MPI_SUCCESS and garbage, and the peer's notice waits behind unacknowledged
// heartbeats in its TCP queue; this rank's own timeout names the peer about a
// second later. Reporting the garbage would end this rank with a transport error
// while every other rank reports the failed peer (docs/failures.md). A failure
// with no peer gone (a bug) is reported that much later, on an error path only.
Status Coordinator::await_verdict() {
  transport::ControlPlane& control = *world_.control;
  const auto limit = std::chrono::duration<double>(config_.peer_timeout_seconds + 1.0);
  Waiter waiter(policy_.profile(WaitFor::kPeer),
                Clock::now() + std::chrono::duration_cast<Clock::duration>(limit));
  do {
    Status verdict = control.check_peers();
    if (!verdict.ok()) return verdict;
  } while (waiter.pause());
  return Status::OK();
}

void Coordinator::stop_for(const Status& failure) {
  // The liveness check's own status names the ranks without the file:line
  // context that the error picked up on its way here.
  Status liveness = failure.code() == Code::kRankFailed || world_.control->topology().size == 1
                        ? world_.control->check_peers()
                        : await_verdict();
  if (!liveness.ok()) {
    peer_failed(liveness);
    fail_everything(liveness);
    dump_flight_recorder("peer failed: " + liveness.message());
    return;
  }
  KOLO_LOG(kError) << "negotiation failed, stopping: " << failure.to_string();
  fail_everything(Status(Code::kTransport, "kolo's control plane failed: " + failure.message()));
  dump_flight_recorder("control plane failed: " + failure.message());
}

bool Coordinator::has_news_now(uint64_t next) {
  return queue_.has_queued() || shutdown_requested_.load(std::memory_order_acquire) ||
         world_.control->rung(next) || negotiator_.has_news(Clock::now());
}

Status Coordinator::wait_for_news(std::unique_lock<std::mutex>& lock) {
  transport::ControlPlane& control = *world_.control;
  const auto poll = std::chrono::microseconds(static_cast<int64_t>(config_.cycle_time_ms * 1000));
  const WaitProfile& news = policy_.profile(WaitFor::kNews);
  Waiter idle(news);
  idle.restart(Clock::now());  // the yields count from here
  while (true) {
    if (!lock.owns_lock()) lock.lock();
    const bool helping = gate_->helping();
    if (ended_ && !helping) return Status::OK();
    const uint64_t next = negotiator_.cycles();
    if (!helping) {
      dump_if_signalled();
      if (has_news_now(next)) return Status::OK();
    }
    if (gate_->helped_within(policy_.doze_window())) {
      lock.unlock();
      doze_while_helped();
      idle.restart(Clock::now() - news.yield_for);  // then look at once, without the yields
      continue;
    }
    executor_.poll();  // Note [One execution model] in executor.h
    KOLO_RETURN_IF_ERROR_AS_IS(control.check_peers());
    const auto now = Clock::now();
    negotiator_.warn_stalls(now);  // a stall report due is news
    if (negotiator_.has_news(now)) return Status::OK();
    // Device work in flight is polled longer, and sleeps are capped in case a
    // wake-up is lost (its transport wakes the coordinator when it finishes).
    const bool busy = executor_.busy();
    const WaitProfile& profile = busy ? policy_.profile(WaitFor::kDeviceInFlight) : news;
    auto until = negotiator_.next_deadline(now);
    if (busy) until = std::min<Clock::time_point>(until, now + profile.max_sleep);
    lock.unlock();
    idle.use(profile);
    if (idle.pause_awake(now)) continue;  // yields
    // Sleep until a peer rings, an enqueue wakes us, device work finishes, or the
    // stall timers are due.
    control.wait_for_ring(next, std::chrono::duration_cast<std::chrono::microseconds>(until - now),
                          poll);
  }
}

// Note [The coordinator dozes while waiters run cycles]: not on the gate's mutex
// while one helps. Each doze that ends while a thread still helps is twice as
// long as the last, up to the profile's longest: a long cycle is not interrupted
// at every doze's end, nor is the caller's time between operations.
void Coordinator::doze_while_helped() {
  if (gate_->helping()) doze_.restart();
  Clock::duration doze = doze_.take_sleep();
  const WaitProfile& profile = policy_.profile(WaitFor::kDoze);
  while (!gate_->doze(std::chrono::duration_cast<std::chrono::microseconds>(doze)) &&
         gate_->helping())
    doze = profile.after(doze);
}

void Coordinator::fail_everything(const Status& status) {
  executor_.finish_all();  // device work already queued runs to its own end
  timeline_.close();
  for (TensorEntry& e : queue_.close(status)) e.handle->complete(status);
  const Clock::time_point now = Clock::now();
  for (auto& [name, e] : pending_) complete(e, status, now);
  pending_.clear();
}

}  // namespace kolo::core
