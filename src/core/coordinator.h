// Coordinator: the background thread's work — wait for news, negotiate a cycle,
// execute what is ready, repeat — until some rank asks to stop.
//
// The idle wait (see Note [Waking up]) is where kolo decides between latency and
// CPU: it looks for news between yields briefly, then sleeps in the control
// plane's wait_for_ring, as the world's WaitPolicy says (WaitFor::kNews,
// kDeviceInFlight, kDoze in common/wait_policy.h), and starts a cycle as soon as
// this rank has news (a local enqueue wakes it at once) or a peer has rung the
// doorbell for the next cycle.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/knobs.h"
#include "common/wait_policy.h"
#include "core/autotune.h"
#include "core/coordinator_gate.h"
#include "core/executor.h"
#include "core/flight_recorder.h"
#include "core/fusion_buffer.h"
#include "core/negotiator.h"
#include "core/timeline.h"
#include "core/tensor_queue.h"
#include "transport/registry.h"
#include "transport/world.h"

namespace kolo::core {

class Coordinator {
 public:
  // `world`, `queue`, `shutdown_requested` and `timeline` outlive the coordinator.
  Coordinator(transport::World& world, const Config& config, TensorQueue& queue,
              const std::atomic<bool>& shutdown_requested, Timeline& timeline);
  ~Coordinator();

  // Init-time checks that need the world (the transport preference), and
  // KOLO_TIMELINE's file.
  Status init();

  // The coordinator thread's body. Returns once every rank stopped, the control
  // plane broke or a peer failed (see core/peer_failure.h); every local tensor
  // has completed by then.
  void run();

  // Writes this rank's flight recorder to KOLO_FLIGHT_RECORDER_DIR and logs where
  // (or why it could not). Coordinator thread only; nothing when the recorder is
  // off. Called on a stall report, when the control plane fails, and on SIGUSR1.
  void dump_flight_recorder(const std::string& reason);

  // What autotune has done on this rank; it outlives the coordinator.
  std::shared_ptr<const AutotuneRecord> autotune_record() const { return autotune_record_; }

  // How this world waits, and whether a waiter runs the cycle (the runtime asks
  // it at each submission).
  const WaitPolicy& wait_policy() const { return policy_; }
  // Who runs cycles for a thread that waits on a handle, where the policy says
  // it may (Note [The waiter runs the cycle]).
  std::shared_ptr<CycleGate> helper() const { return gate_; }
  // CycleGate only, with its mutex held: one cycle if this rank has news.
  enum class Helped { kIdle, kRan, kEnded, kNotAlone, kAlone };
  Helped help_once();
  // CycleGate only, with its mutex held: `entry` joins this rank's cycle state
  // straight from the caller, without the queue, and a cycle runs (Note [A
  // blocking call enters the cycle] in coordinator_gate.h). *refused: why the
  // entry was refused and left with the caller, as TensorQueue::push would
  // refuse it (then nothing ran: kIdle), or OK.
  Helped run_with(TensorEntry& entry, Status* refused);
  // CycleGate only, with its mutex held: Note [A call alone]. kNotAlone: the
  // call cannot go alone, and nothing was touched. kAlone: it went and is done
  // (its outcome is OK: nothing fails once every rank has its parts). kIdle:
  // refused as TensorQueue::push would refuse it (*result says why). kRan or
  // kEnded: it did not complete alone; the entry, with the handle
  // `make_handle` gave it, went on in a cycle as run_with()'s does.
  Helped run_alone(TensorEntry& entry, const HandleMaker& make_handle, Status* result);

 private:
  // Runs cycles until the end; with the gate's mutex held on return.
  void run_cycles(std::unique_lock<std::mutex>& lock);
  // One cycle, from the drain to the handles' completion. On a stop or a failure
  // it sets ended_ and end_ (the status to fail the rest with); the thread that
  // runs the coordinator then calls finish(). Gate held. `start`: when it
  // started, if the caller has just read the clock (the epoch: read it).
  void run_cycle(Clock::time_point start = {});
  // The rest of a cycle once the negotiation has returned `status` (its
  // ready list in ready_): the timeline, the execution, the stop and the
  // liveness check. `asked`: this rank asked to stop in it.
  void finish_cycle(Status status, Clock::time_point cycle_start, bool asked, bool stop,
                    bool carried);
  void fail_cycle(Status status);  // the cycle failed: ended_, with end_ to fail the rest with
  void take_carried();  // carried_ from the control plane (every rank's carried part)
  // Note [A call alone]: whether `entry`, with nothing else pending, may go alone
  // (*bit: its cache entry); then its cycle, from `start`: true when it
  // completed alone (its handle, if it has one, completed), false when it joined
  // the cycle, with a handle from `make_handle` if given, and the cycle went on.
  bool may_go_alone(const TensorEntry& entry, uint32_t* bit) const;
  bool go_alone(TensorEntry& entry, uint32_t bit, Clock::time_point start,
                const HandleMaker* make_handle);
  void finish();
  // help_once() and run_with() once there is news: one cycle (from `start`, as
  // run_cycle's).
  Helped cycle_for_helper(Clock::time_point start = {});
  // After a helper's cycle: kRan, or kEnded (the coordinator thread woken to finish).
  Helped helped_cycle();
  // A submitted entry joins the cycle state: the negotiator, the flight
  // recorder and the pending table. Gate held.
  void track(TensorEntry& entry);
  // Whether this rank has news for a cycle now. Gate held.
  bool has_news_now(uint64_t next);
  // Returns (with the gate held) OK when there is news, or the liveness check's
  // failure.
  Status wait_for_news(std::unique_lock<std::mutex>& lock);
  // Dozes until no thread helps or a helper hands back. Gate not held.
  void doze_while_helped();
  // Fails everything with `failure` (or, when a peer failed, with the liveness
  // check's own status) and reports a peer failure once.
  void stop_for(const Status& failure);
  // The liveness check's verdict, waited for up to the peer timeout (Note [A
  // broken cycle waits for liveness's verdict]); OK if none came.
  Status await_verdict();
  void fail_everything(const Status& status);
  void complete(TensorEntry& entry, Status status, Clock::time_point at);
  // The timeline's part of a cycle in which some rank records (Note [Who came
  // last] in timeline.h): note_submits() takes this rank's submits, then
  // record_cycle() learns who came last to each ready name and writes this
  // rank's events. record_cycle is collective.
  void note_submits(const std::vector<Response>& ready);
  Status record_cycle(const std::vector<Response>& ready, Clock::time_point start);

  // coordinator_autotune.cc: the setting every rank applies at the same cycle.
  Status init_autotune();
  void apply_setting(const TunedSetting& setting);
  void take_announced_setting();
  void tune_after_cycle();

  // coordinator_flight.cc: the flight recorder and the stall report.
  void init_flight_recorder();
  // The flight recorder's "negotiated" (at `now`), and each handle's phases up to it.
  void record_negotiated(const std::vector<Response>& ready, Clock::time_point cycle_start,
                         Clock::time_point now);
  void dump_if_signalled();
  RankReport rank_report() const;

  transport::World& world_;
  const Config config_;
  TensorQueue& queue_;
  const std::atomic<bool>& shutdown_requested_;
  transport::Selector selector_;
  FusionBuffer fusion_;
  Timeline& timeline_;
  Negotiator negotiator_;
  Executor executor_;
  Pending pending_;  // drained, not yet completed
  std::vector<TensorEntry> drained_;  // run_cycle's, empty between cycles (kept for its storage)
  FlightRecorder flight_;
  bool owns_dump_signal_ = false;
  uint32_t dump_signals_seen_ = 0;
  Clock::time_point last_submission_{};  // epoch: nothing submitted yet
  // The timeline's cycle: by ready response, this rank's submit (epoch: none) and
  // its age (-1: none) at ready_at_, and who came last.
  Clock::time_point ready_at_{};
  std::vector<Clock::time_point> submitted_;
  std::vector<int64_t> submit_ages_;
  std::vector<Timeline::Straggler> stragglers_;
  std::unique_ptr<AutotuneDriver> autotune_;  // rank 0 with KOLO_AUTOTUNE=1
  uint64_t bytes_before_cycle_ = 0;
  std::shared_ptr<AutotuneRecord> autotune_record_ = std::make_shared<AutotuneRecord>();
  std::vector<Response> ready_;  // the cycle's responses (scratch)
  std::vector<const char*> carried_;  // every rank's carried bucket, when the cycle has them
  const WaitPolicy policy_;  // common/wait_policy.h
  std::shared_ptr<CycleGate> gate_;
  // The length of the next doze that begins (Note [The coordinator dozes while
  // waiters run cycles]): WaitFor::kDoze, from its first after one that began
  // while a thread helped.
  Waiter doze_;
  // Note [A call alone]: calls may go alone (the carry is on, no autotuner).
  const bool alone_allowed_;
  bool ended_ = false;     // a cycle stopped kolo or failed: finish() is due
  bool end_failed_ = false;  // ...by a failure (end_), not a stop
  Status end_;
};

// Note [Waking up]
// Horovod's coordinator runs a cycle every HOROVOD_CYCLE_TIME whether or not there
// is work, so a lone small allreduce waits for the next tick. kolo's coordinator
// runs a cycle only when some rank has news, and joins a peer's cycle as soon as it
// sees the doorbell. On one node the doorbell is a futex in shared memory, so an
// idle coordinator sleeps without polling and wakes within microseconds; a peer on
// another node rings over MPI, which an idle coordinator polls every
// KOLO_CYCLE_TIME_MS at most. Batching still happens: whatever is enqueued while
// a cycle runs is negotiated (and fused) together in the next.

// Note [A call alone]
// ~~~~~~~~~~~~~~~~~~~
// A cached host collective small enough to ride with the AND (Note [Data rides
// with the AND] in negotiator.h), on a rank with nothing else pending, knows
// its cycle before it starts: its vector says this one bit ready, and its
// carry holds this one tensor's part. If every rank's vector is equal to it
// (NodeAnd compares them as it ANDs), every rank packed the same, and the
// operation is complete once this rank has finished it from the carried parts;
// the pending table, the ready list and the planner have nothing to add. So
// such a call builds that vector itself (Negotiator::cycle_alone), packs its
// part (Executor::pack_alone), and after the AND either finishes (an
// allreduce: the carried reduction; the others: their family's start, as in a
// cycle that carried, Executor::run_alone) and completes, or, the vectors
// having differed, joins the cycle as any entry would and the cycle goes on
// from the AND's answer. Two ways in: a blocking call (kolo_allreduce,
// kolo_broadcast, kolo_reducescatter, kolo_allgather, kolo_alltoall) with the
// gate free and nothing queued (Note [A blocking call enters the cycle] in
// coordinator_gate.h), which then needs no handle unless it joins the cycle,
// fails, or is an allgather or alltoall (whose output lives on the handle); and
// a cycle whose drain found one entry (an asynchronous allreduce, allgather,
// broadcast, alltoall or reducescatter; its waiter or the coordinator running
// the cycle). Each rank's choice is its own:
// a peer that goes the long way builds the same vector and packs the same
// bytes, and the carried reduction is the carrier's, so the results are the
// same bits either way. What the call still does: the duplicate check, the
// sequence numbers and the response cache's order (every rank's alike), the
// flight recorder's entry (one record) and the handle's phases, which share
// one clock read after the reduction (a blocking call's only read: its record
// says it was submitted then). What it skips besides: the liveness check
// that ends a cycle (the AND's own wait consults liveness; no transport ran)
// and the stall timers (nothing waits). Not while the timeline records, the
// autotuner runs, or the rank has anything else pending or on a device. The
// rows (2 ranks, 8 B-16 KiB, every collective): docs/perf/small-ops.md, "A
// call alone".

// Note [A cached operation's storage is reused]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cached small operation costs about a microsecond, most of it kolo's own
// bookkeeping on the host, and each heap allocation on its path (tens of
// nanoseconds with its free) is a visible share of it. So the tables an
// operation passes through keep what a finished operation leaves behind and
// reuse it for the next one (the nodes of their maps and sets through
// core/spare_nodes.h):
// - TensorQueue's set of names in flight keeps finished names' nodes;
// - the negotiator's waiting table keeps the nodes of ended waits, and
//   overwrites the last cycle's ready responses in place (a name, the shapes
//   and the allgather's rows are assigned into storage already there);
// - the coordinator's table of pending tensors (core/pending.h) keeps erased
//   nodes, with the entry's handle and buffers dropped at once;
// - make_entry moves the caller's name into the request instead of copying it.
// What is left is the name the C API builds from the caller's string, the
// handle and the C API's wrapper for it, and per-collective vectors (the
// transport's view, the allgather's splits on the handle). The allocation
// counts and timings: docs/perf/small-ops.md.

}  // namespace kolo::core
