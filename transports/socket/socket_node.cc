// join_node (socket_node.h): the node layer made over the socket control plane,
// and the adapters that plug it into the plane's node seam.
#include "transports/socket/socket_node.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/logging.h"
#include "transport/registry.h"
#include "transports/shm/board.h"
#include "transports/shm/collectives.h"
#include "transports/shm/doorbell.h"
#include "transports/shm/node_and.h"

namespace kolo::socket {
namespace {

// How often HostLiveness::check() does its work; between, it answers from one
// clock read (waits call it between every test).
constexpr auto kCheckEvery = std::chrono::milliseconds(1);

// Note [The board beside the sockets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The engine already judges every peer's silence, host peers included, and
// better than the board can: it does not count the time this rank itself was
// starved or stopped (Note [Liveness from the sockets] in engine.h). With the
// board's silence rule at the same timeout, a held rank released under load
// (failure.traced.socket.np3 at a load average of 14 on 2 cores) was declared
// silent by the board a few milliseconds past the timeout. So the board gets
// twice the peer timeout: it reports a host peer whose pid is gone, at its next
// check, and a silence only the engine somehow missed; the engine decides
// ordinary silence.

// Note [A verdict is never answered from the last look]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A caller whose operation met a peer's failure (the engine's status: say a
// peer's verdict that arrived while it waited) asks check() at once which peer
// failed, to report KOLO_ERR_RANK_FAILED naming it (Coordinator::stop_for). A
// check() throttled whole answers OK from its look a moment before, and the
// failure is reported as a broken control plane (KOLO_ERR_TRANSPORT; a rank
// resumed from SIGSTOP while idle did). So only the board's scan is throttled;
// the engine's verdict is an atomic flag, read on every call.

// The plane's Liveness with host peers: the engine's verdicts (closed
// connections, silence, a peer's verdict: Note [Liveness from the sockets] in
// engine.h) and the node's board (a host peer's pid gone or its heartbeat old).
// A failure the board finds becomes the engine's verdict, so it reaches every
// rank, and wakes the plane's sleepers. check(): one thread at a time (the
// plane's); failed(): any thread.
class HostLiveness : public transport::Liveness {
 public:
  // `members`: the plane's world ranks (the board names plane ranks).
  HostLiveness(std::shared_ptr<Engine> engine, std::unique_ptr<shm::NodeBoard> board,
               std::vector<int> members)
      : engine_(std::move(engine)), board_(std::move(board)), members_(std::move(members)) {}

  Status check() override {
    if (failed_flag_.load(std::memory_order_acquire)) return failed_;
    // Only the board's look waits for kCheckEvery: the engine's verdict is taken
    // at once (Note [A verdict is never answered from the last look]).
    const bool engine_failed = engine_->failed();
    const auto now = std::chrono::steady_clock::now();
    if (!engine_failed && now < next_check_) return Status::OK();
    next_check_ = now + kCheckEvery;
    Status engine = engine_->check();
    if (engine.ok() && board_) {
      std::vector<std::string> why;
      // Beats for this rank too. A host peer that said bye has left in order:
      // its exit or silence is no failure (Note [Closing in order] in engine.h).
      board_->find_failed(&why, [this](int rank) {
        return rank >= 0 && rank < static_cast<int>(members_.size()) && engine_->left(members_[rank]);
      });
      if (why.empty()) return Status::OK();
      std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
      for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
      engine_->declare_failure(message);
      engine = engine_->check();  // the first verdict, this one or a peer's
    }
    if (engine.ok()) return engine;
    failed_ = engine;
    failed_flag_.store(true, std::memory_order_release);
    transport::record_peer_failure();
    return failed_;
  }
  bool failed() const override {
    return failed_flag_.load(std::memory_order_acquire) || engine_->failed();
  }
  std::chrono::milliseconds check_every() const override {
    return board_ ? board_->check_every() : engine_->check_every();
  }

 private:
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<shm::NodeBoard> board_;  // null: no host peers
  const std::vector<int> members_;
  std::chrono::steady_clock::time_point next_check_{};
  Status failed_;
  std::atomic<bool> failed_flag_{false};
};

// The seam's faces over the node layer's own classes.
class ShmAnd : public NodeAnd {
 public:
  explicit ShmAnd(std::unique_ptr<shm::NodeAnd> a) : and_(std::move(a)) {}
  size_t max_words() const override { return shm::NodeAnd::kMaxWords; }
  size_t carry_bytes(size_t words, bool in_line) const override {
    return shm::NodeAnd::carry_capacity(words, in_line);
  }
  Status run(std::vector<uint64_t>* bits) override { return and_->run(bits); }
  Status run_ringing_late(std::vector<uint64_t>* bits, NodeDoorbell* late,
                          uint64_t cycle) override {
    shm::NodeAnd::RingLate<NodeDoorbell> ringer{late, cycle};
    return and_->run(bits, &decltype(ringer)::ring, &ringer);
  }
  char* carry_slot(size_t words, bool in_line) override {
    return and_->carry_slot(words, in_line);
  }
  bool unanimous() const override { return and_->unanimous(); }
  const char* carried(int local_rank) const override { return and_->carried(local_rank); }

 private:
  std::unique_ptr<shm::NodeAnd> and_;
};

class ShmBell : public NodeDoorbell {
 public:
  explicit ShmBell(std::unique_ptr<shm::NodeDoorbell> d) : bell_(std::move(d)) {}
  void ring(uint64_t cycle) override { bell_->ring(cycle); }
  bool rung(uint64_t cycle) const override { return bell_->rung(cycle); }
  void wait(uint64_t cycle, std::chrono::microseconds timeout,
            const std::function<bool()>& also_ready) override {
    bell_->wait(cycle, timeout, also_ready);
  }
  void wake() override { bell_->wake(); }

 private:
  std::unique_ptr<shm::NodeDoorbell> bell_;
};

// The plane's node services over `node`.
Status services_over(SocketControlPlane& control, const std::shared_ptr<shm::Node>& node,
                     std::chrono::milliseconds peer_timeout, NodeServices* out) {
  const transport::Topology& t = control.topology();
  std::unique_ptr<shm::NodeBoard> board;  // See Note [The board beside the sockets].
  if (node->local_size() > 1)
    KOLO_RETURN_IF_ERROR(shm::NodeBoard::create(node, 2 * peer_timeout, &board));
  out->liveness = std::make_unique<HostLiveness>(control.engine(), std::move(board), control.members());
  if (node->local_size() > 1) {
    std::unique_ptr<shm::NodeDoorbell> bell;
    KOLO_RETURN_IF_ERROR(shm::NodeDoorbell::create(node, &bell));
    out->doorbell = std::make_unique<ShmBell>(std::move(bell));
  }
  if (t.size > 1 && t.local_size == t.size) {
    std::unique_ptr<shm::NodeAnd> a;
    KOLO_RETURN_IF_ERROR(shm::NodeAnd::create(node, out->liveness.get(), &a));
    out->node_and = std::make_unique<ShmAnd>(std::move(a));
  }
  out->on_host.assign(static_cast<size_t>(t.size), false);
  for (int r : node->world_ranks()) out->on_host[static_cast<size_t>(r)] = true;
  return Status::OK();
}

}  // namespace

shm::NodeOptions node_options(const transport::Topology& topology, size_t shm_slot_bytes) {
  shm::NodeOptions o;
  const bool one_node = topology.local_size == topology.size;
  o.allreduce_slot_bytes = one_node ? shm_slot_bytes : transport::hierarchical_slot_bytes();
  o.collectives_slot_bytes = shm::ShmCollectives::kDefaultSlotBytes;
  o.node_and = one_node && topology.size > 1;
  return o;
}

Status join_node(SocketControlPlane* control, const NodeJoin& options, std::shared_ptr<shm::Node>* node) {
  node->reset();
  if (!options.enabled) return Status::OK();
  std::shared_ptr<shm::Node> made;
  Status s = shm::Node::create(*control, node_options(control->topology(), options.shm_slot_bytes), &made);
  if (!s.ok()) {
    // Node::create's verdict is every rank's: all go on without it, or all fail.
    if (s.code() == Code::kRankFailed || control->engine()->failed()) return s;
    KOLO_LOG(kWarning) << "the socket world runs without the node layer: " << s.message();
    return Status::OK();
  }
  if (made->local_size() != control->topology().local_size)
    return internal_error("the node layer's node and the socket world's host differ in size");
  NodeServices services;
  KOLO_RETURN_IF_ERROR(services_over(*control, made, options.peer_timeout, &services));
  control->use_node(std::move(services));
  *node = std::move(made);
  return Status::OK();
}

}  // namespace kolo::socket
