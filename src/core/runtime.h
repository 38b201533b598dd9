// Runtime: one rank's kolo — the tensor queue, the background coordinator thread
// and what it drives (negotiation, fusion, execution).
//
// Lifecycle: start() takes a World (from transports/mpi or transports/loopback)
// and starts the coordinator; shutdown() asks every rank to stop and joins.
// allreduce_async() may be called from any thread while running. One rank's
// shutdown (or a broken control plane) stops every rank's coordinator at the same
// cycle; a failed peer stops this rank's. Afterwards submissions are refused and
// pending handles have completed with KOLO_ERR_SHUTDOWN (or the transport's
// error, or KOLO_ERR_RANK_FAILED). The coordinator thread then releases the
// world's transports itself (Note [Shutdown without waiting for the others]), so
// shutdown() never waits for another rank.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/knobs.h"
#include "common/status.h"
#include "common/wait_policy.h"
#include "core/coordinator.h"
#include "core/handle.h"
#include "core/process_sets.h"
#include "core/tensor_queue.h"
#include "transport/world.h"

namespace kolo::core {

// Any collective. Fields a collective does not use are ignored.
struct CollectiveArgs {
  Collective collective = Collective::kAllreduce;
  std::string name;
  const void* input = nullptr;
  void* output = nullptr;
  // The tensor is `rows` rows of `row_count` elements (its first dimension and the
  // product of the others). Allreduce and broadcast take flat tensors: row_count
  // stays 1, so rows is the element count there too.
  int64_t rows = 0;
  int64_t row_count = 1;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  bool deterministic = false;              // allreduces: reduce in rank order (or KOLO_DETERMINISTIC)
  Device device;
  int root = 0;                            // broadcast (a rank of the process set's
                                           // runtime; Runtime::submit translates a
                                           // global rank given with process_set)
  const int64_t* send_rows = nullptr;      // alltoall: rows per destination, or null (even)
  bool into = false;                       // allgather: into `output` (kolo_allgather_into)
  // Groups: each member's name and buffers, and its size in `rows` as for a
  // tensor alone (a grouped allreduce's members are flat: rows are elements; a
  // grouped allgather's or reducescatter's rows are member_row_counts[i] elements
  // each). The entry's members (TensorEntry::Member) count elements.
  struct Member {
    const void* input;
    void* output;
    int64_t rows;
  };
  std::vector<std::string> member_names;
  std::vector<Member> members;
  std::vector<int64_t> member_row_counts;
  int32_t process_set = 0;                 // 0: the global set
  // The caller's shape (dimensions), when given: checked against rows and
  // row_count, and negotiated in full (Note [Negotiated shapes]). Grouped calls
  // give one per member in member_shapes, or none.
  std::optional<std::vector<int64_t>> shape;
  std::vector<std::vector<int64_t>> member_shapes;
};

class Runtime {
 public:
  // Validates the configuration against the world (e.g. KOLO_TRANSPORT names a
  // transport the world offers), allocates the fusion buffer and starts the
  // coordinator. Collective: every rank of the world calls it (on its own thread),
  // and if it fails on any rank it fails on all, with one message naming the ranks
  // (core/init_agreement.h). On error nothing runs and the world is released.
  static Status start(transport::World world, const Config& config, std::unique_ptr<Runtime>* out);
  // The runtime of process set `id` over the set's world (collective over its
  // members); it has no process sets of its own.
  static Status start_set(transport::World world, const Config& config, int32_t id,
                          std::unique_ptr<Runtime>* out);

  // Stops like shutdown() if still running.
  ~Runtime();

  // Any collective (collective_args.cc validates per collective), in the process
  // set args.process_set, whose runtime it reaches: an unknown id, or a set this
  // rank is not in, is KOLO_ERR_INVALID_ARGUMENT; a broadcast's root is then a
  // global rank, which must be in the set. A barrier without a name gets the
  // set's next barrier name.
  Status submit(CollectiveArgs args, std::shared_ptr<HandleState>* handle);
  // submit(), then waits until the handle is done: a blocking call. Where a
  // waiter may run the cycle, the entry skips the queue (Note [A blocking call
  // enters the cycle] in coordinator_gate.h). A refusal is returned as by
  // submit(); the operation's own outcome is the handle's, or OK with *handle
  // null when the call completed alone without one (Note [A call alone] in
  // coordinator.h: an allgather's or alltoall's output is always on a handle,
  // and a call alone that failed has one to carry its status).
  Status run(CollectiveArgs args, std::shared_ptr<HandleState>* handle);

  // The global set's process sets (process_sets.h); null in a set's own runtime.
  ProcessSets* process_sets() { return sets_.get(); }

  // Names in flight on this rank (submitted, not yet completed).
  size_t in_flight() const { return queue_.in_flight(); }

  // A barrier's or join's internal name; the barrier counter advances per call, so
  // every rank must call barrier the same number of times in the same order.
  std::string next_barrier_name() { return "kolo.barrier." + std::to_string(barriers_++); }

  // Asks every rank to stop, waits for this rank's coordinator to finish (the
  // agreed stop cycle, or a peer failure, within the peer timeout) and its
  // teardown, and releases the world. Idempotent. The global set's runtime stops
  // its process sets first (each set's members stop it together), and whenever
  // the global set stops, however it stops.
  void shutdown();

  // This rank's timeline (core/timeline.h): per rank, from any thread. Starting
  // fails with kShutdown once kolo has stopped; stopping a timeline that kolo's
  // stop already ended fails as "not started" (its file is complete).
  Status start_timeline(const std::string& path, bool mark_cycles);
  Status stop_timeline();

  // kolo_handle_stream_wait: makes `stream` wait for the handle's device work.
  Status stream_wait(HandleState& handle, void* stream);

  bool running() const { return running_.load(std::memory_order_acquire); }
  const transport::Topology& topology() const { return topology_; }
  // What autotune has done on this rank (core/autotune.h); any thread.
  AutotuneRecord::State autotune_state() const { return autotune_record_->state(); }

 private:
  Runtime(transport::World world, const Config& config, int32_t set_id);
  static Status launch(std::unique_ptr<Runtime> rt, std::unique_ptr<Runtime>* out);
  Status enter(CollectiveArgs args, std::shared_ptr<HandleState>* handle, bool blocking);
  // The coordinator thread's body after run(): see the Note below.
  void release_world();

  transport::World world_;
  std::mutex device_mu_;  // world_.device_support may go while a user thread asks it
  const Config config_;
  const transport::Topology topology_;
  TensorQueue queue_;
  Timeline timeline_;  // outlives the coordinator, which records into it
  std::atomic<bool> running_{false};
  std::atomic<bool> shutdown_requested_{false};
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<const AutotuneRecord> autotune_record_;
  // The coordinator's: how a handle's waiter waits, and who runs cycles for it
  // where the policy says a waiter may (Note [The waiter runs the cycle]).
  WaitPolicy waits_;
  std::shared_ptr<CycleGate> helper_;
  std::thread thread_;
  std::mutex shutdown_mu_;
  std::atomic<uint64_t> barriers_{0};
  const int32_t set_id_;  // 0: the global set
  // The global set's process sets; destroyed (their runtimes stopped) before the
  // world, whose finalize may finalise MPI.
  std::unique_ptr<ProcessSets> sets_;
};

// Note [Shutdown without waiting for the others]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Freeing a world may be collective (the MPI world frees its communicators, which
// MPI defines as collective). If each rank freed its world in kolo_shutdown, one
// rank's shutdown would wait until every other rank had called kolo_shutdown too.
// Instead every rank's coordinator stops at the same negotiation cycle (one
// rank's request to stop reaches all), and each coordinator thread then frees
// its world at once, whether or not its user has called kolo_shutdown: the
// point every rank reaches together. A barrier bounded by the liveness check
// comes first, so a rank that dies just then is reported, not waited for; after
// a peer failed, the collective frees are skipped (leaked). kolo_shutdown then
// only joins the thread and runs the world's finalize.

}  // namespace kolo::core
