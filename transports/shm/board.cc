#include "transports/shm/board.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/check.h"

namespace kolo::shm {
namespace {

// How often check() does its work; between, it answers from one clock read.
constexpr auto kCheckEvery = std::chrono::milliseconds(1);

// A rank's line on the board (Layout::kBoard of its part).
struct Line {
  std::atomic<int64_t> beat_ns;  // CLOCK_MONOTONIC of the rank's last beat
  int32_t rank;                  // world rank
  int32_t pid;
};
static_assert(sizeof(Line) <= Layout::kLine, "a board line fits a cache line");

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}


std::string seconds(double s) {
  std::ostringstream os;
  os.precision(3);
  os << s << " s";
  return os.str();
}

Line* line_of(const Node& node, int local) {
  return reinterpret_cast<Line*>(node.at(local, Layout::kBoard));
}

}  // namespace

std::chrono::milliseconds beat_interval(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(10), timeout / 5);
}

void NodeBoard::introduce(char* line, int world_rank) {
  Line* mine = reinterpret_cast<Line*>(line);
  mine->beat_ns.store(monotonic_ns(), std::memory_order_relaxed);
  mine->rank = world_rank;
  mine->pid = static_cast<int32_t>(getpid());
}

NodeBoard::NodeBoard(std::shared_ptr<Node> node, std::chrono::milliseconds timeout)
    : node_(std::move(node)), timeout_(timeout), interval_(beat_interval(timeout)) {}

Status NodeBoard::create(std::shared_ptr<Node> node, std::chrono::milliseconds timeout,
                         std::unique_ptr<NodeBoard>* out) {
  if (timeout.count() <= 0) return invalid_argument("peer timeout must be positive");
  KOLO_RETURN_IF_ERROR(node->claim(Node::Region::kBoard, "the node's board"));
  std::unique_ptr<NodeBoard> board(new NodeBoard(std::move(node), timeout));
  const int n = board->node_->local_size();
  board->pid_visible_.assign(static_cast<size_t>(n), false);
  board->traced_ns_.assign(static_cast<size_t>(n), 0);
  for (int p = 0; p < n; ++p) {
    const pid_t pid = line_of(*board->node_, p)->pid;
    board->pid_visible_[static_cast<size_t>(p)] = kill(pid, 0) == 0 || errno == EPERM;
  }
  board->beat();
  if (n > 1) board->beater_ = std::thread([b = board.get()] { b->beat_loop(); });
  *out = std::move(board);
  return Status::OK();
}

NodeBoard::~NodeBoard() {
  if (!beater_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(beater_mu_);
    stopping_ = true;
  }
  beater_cv_.notify_all();
  beater_.join();
}

// Also notes whether this process was away (stopped, starved) since its last
// beat: Note [Silence is counted only while this process listens].
void NodeBoard::beat() {
  const int64_t now_ns = monotonic_ns();
  const int64_t last = last_beat_ns_.exchange(now_ns, std::memory_order_relaxed);
  const int64_t away_ns = 2 * std::chrono::nanoseconds(interval_).count() + 50000000;
  if (last > 0 && now_ns - last > away_ns) resumed_ns_.store(now_ns, std::memory_order_relaxed);
  line_of(*node_, node_->local_rank())->beat_ns.store(now_ns, std::memory_order_relaxed);
}

void NodeBoard::beat_loop() {
  std::unique_lock<std::mutex> lock(beater_mu_);
  while (!stopping_) {
    beat();
    beater_cv_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

Status NodeBoard::check() {
  if (!failed_.ok()) return failed_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return Status::OK();
  next_check_ = now + kCheckEvery;
  std::vector<std::string> why;
  find_failed(&why);
  if (why.empty()) return Status::OK();
  std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
  for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
  failed_ = Status(Code::kRankFailed, message);
  transport::record_peer_failure();
  return failed_;
}

void NodeBoard::find_failed(std::vector<std::string>* why,
                            const std::function<bool(int rank)>& left_in_order) {
  beat();
  const int64_t now_ns = monotonic_ns();
  for (int p = 0; p < node_->local_size(); ++p) {
    if (p == node_->local_rank()) continue;
    const Line* peer = line_of(*node_, p);
    if (left_in_order && left_in_order(peer->rank)) continue;
    const std::string who = "rank " + std::to_string(peer->rank) + " (pid " +
                            std::to_string(peer->pid) + " on this node)";
    if (pid_visible_[p] && kill(peer->pid, 0) != 0 && errno == ESRCH) {
      why->push_back(who + " has exited");
      continue;
    }
    const int64_t beat_ns = peer->beat_ns.load(std::memory_order_relaxed);
    const int64_t resumed_ns = resumed_ns_.load(std::memory_order_relaxed);
    const int64_t silent_ns = now_ns - std::max({beat_ns, traced_ns_[p], resumed_ns});
    if (silent_ns <= std::chrono::nanoseconds(timeout_).count()) continue;
    if (pid_visible_[p] && transport::held_by_debugger(peer->pid)) {
      traced_ns_[p] = now_ns;  // a full timeout to beat again once released
      continue;
    }
    why->push_back(who + " has not been heard from for " + seconds(silent_ns * 1e-9) +
                   " (KOLO_PEER_TIMEOUT_SECONDS is " + seconds(timeout_.count() * 1e-3) + ")");
  }
}

}  // namespace kolo::shm
