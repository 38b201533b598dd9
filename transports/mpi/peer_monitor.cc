#include "transports/mpi/peer_monitor.h"

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
#include "common/logging.h"
#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {
namespace {

// How often check() does its work; between, it answers from one clock read.
constexpr auto kCheckEvery = std::chrono::milliseconds(1);
// How long the destructor waits for a cancelled receive (peers may be gone).
constexpr auto kReleaseWait = std::chrono::milliseconds(100);

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A beat every fifth of the timeout: four beats can be late before a peer is
// declared silent. Never below 10 ms (idle coordinators wake this often).
std::chrono::milliseconds interval_for(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(10), timeout / 5);
}

// Whether `pid`'s main thread is in a tracing stop ('t' in /proc/<pid>/stat): a
// debugger holds it. See Note [A debugger's stop is not a failure] in peer_monitor.h.
bool held_by_debugger(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char text[512];
  const size_t n = std::fread(text, 1, sizeof(text) - 1, f);
  std::fclose(f);
  text[n] = '\0';
  const char* close = std::strrchr(text, ')');  // the command name may hold anything
  return close && close[1] == ' ' && close[2] == 't';
}

std::string seconds(double s) {
  std::ostringstream os;
  os.precision(3);
  os << s << " s";
  return os.str();
}

}  // namespace

// One cache line per local rank, in its own segment of the board.
struct PeerMonitor::Board {
  std::atomic<int64_t> beat_ns;  // CLOCK_MONOTONIC of the rank's last check()
  int32_t rank;                  // world rank
  int32_t pid;
};

PeerMonitor::PeerMonitor(std::chrono::milliseconds timeout, const transport::Topology& topology)
    : timeout_(timeout), interval_(interval_for(timeout)), topology_(topology) {}

Status PeerMonitor::create(MPI_Comm control, MPI_Comm local, const transport::Topology& topology,
                           std::chrono::milliseconds timeout, std::unique_ptr<PeerMonitor>* out) {
  if (timeout.count() <= 0) return invalid_argument("peer timeout must be positive");
  std::unique_ptr<PeerMonitor> monitor(new PeerMonitor(timeout, topology));
  KOLO_RETURN_IF_ERROR_AS_IS(monitor->start(control, local));
  *out = std::move(monitor);
  return Status::OK();
}

Status PeerMonitor::start(MPI_Comm control, MPI_Comm local) {
  Deadline deadline(timeout_, "kolo_init (starting the peer monitor)");
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Comm_idup(control, &comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, &deadline));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  if (local != MPI_COMM_NULL && topology_.local_size > 1) {
    KOLO_RETURN_IF_ERROR_AS_IS(ShmWindow::create(local, sizeof(Board), &deadline, &window_));
    window_->set_liveness(this);
    Board* mine = reinterpret_cast<Board*>(window_->segment(window_->local_rank()));
    mine->beat_ns.store(monotonic_ns(), std::memory_order_relaxed);
    mine->rank = topology_.rank;
    mine->pid = static_cast<int32_t>(getpid());
    KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, &deadline));  // every line written
    pid_visible_.assign(window_->local_size(), false);
    traced_ns_.assign(window_->local_size(), 0);
    for (int p = 0; p < window_->local_size(); ++p) {
      const pid_t pid = reinterpret_cast<Board*>(window_->segment(p))->pid;
      pid_visible_[p] = kill(pid, 0) == 0 || errno == EPERM;
    }
  }
  KOLO_RETURN_IF_ERROR_AS_IS(start_remote());
  if (window_ || (thread_sends_ && !remotes_.empty()))
    beater_ = std::thread([this] { beat_loop(); });
  return Status::OK();
}

// The ranks not on this node, found as the world ranks missing from the board.
Status PeerMonitor::start_remote() {
  if (topology_.local_size == topology_.size) return Status::OK();
  std::vector<bool> on_node(topology_.size, false);
  on_node[topology_.rank] = true;
  if (window_) {
    for (int p = 0; p < window_->local_size(); ++p)
      on_node[reinterpret_cast<Board*>(window_->segment(p))->rank] = true;
  }
  const auto now = std::chrono::steady_clock::now();
  remotes_.reserve(topology_.size);
  for (int r = 0; r < topology_.size; ++r) {
    if (on_node[r]) continue;
    Remote& remote = remotes_.emplace_back();
    remote.rank = r;
    remote.heard = now;
  }
  for (Remote& remote : remotes_)
    KOLO_MPI_CHECK(MPI_Irecv(&remote.in, 1, MPI_UINT64_T, remote.rank, kHeartbeatTag, comm_,
                             &remote.recv));
  int provided = 0;
  KOLO_MPI_CHECK(MPI_Query_thread(&provided));
  thread_sends_ = provided == MPI_THREAD_MULTIPLE;
  return Status::OK();
}

void PeerMonitor::beat_loop() {
  std::unique_lock<std::mutex> lock(beater_mu_);
  while (!stopping_) {
    beat_node();
    if (thread_sends_) send_remote(std::chrono::steady_clock::now());
    beater_cv_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

PeerMonitor::~PeerMonitor() {
  if (beater_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(beater_mu_);
      stopping_ = true;
    }
    beater_cv_.notify_all();
    beater_.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) release_requests();
  window_.reset();  // frees collectively unless a peer failed (it asks failed())
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void PeerMonitor::release_requests() {
  for (Remote& remote : remotes_) {
    if (remote.recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&remote.recv);
      bool done = false;
      wait_for(&remote.recv, kReleaseWait, &done).ignore();
      if (!done) MPI_Request_free(&remote.recv);  // the buffer lives in remotes_: leak it
    }
    if (remote.send != MPI_REQUEST_NULL) MPI_Request_free(&remote.send);
  }
  // MPI may still write into the receive buffers: they are kept, reachable, for the
  // life of the process (a deliberate, bounded leak that LeakSanitizer accepts).
  static auto* kept = new std::vector<std::vector<Remote>>();
  static std::mutex kept_mu;
  if (!remotes_.empty()) {
    std::lock_guard<std::mutex> lock(kept_mu);
    kept->push_back(std::move(remotes_));
  }
}

Status PeerMonitor::check() {
  if (!failed_.ok()) return failed_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return Status::OK();
  next_check_ = now + kCheckEvery;
  beat_node();
  if (!thread_sends_) send_remote(now);
  std::vector<std::string> why;
  if (window_) check_node(&why);
  KOLO_RETURN_IF_ERROR(check_remote(now, &why));
  if (why.empty()) return Status::OK();
  std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
  for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
  failed_ = Status(Code::kRankFailed, message);
  record_peer_failure();
  return failed_;
}

void PeerMonitor::beat_node() {
  if (!window_) return;
  Board* mine = reinterpret_cast<Board*>(window_->segment(window_->local_rank()));
  mine->beat_ns.store(monotonic_ns(), std::memory_order_relaxed);
}

// Only one thread sends: the beater when thread_sends_, else check().
void PeerMonitor::send_remote(std::chrono::steady_clock::time_point now) {
  if (remotes_.empty() || now < next_send_) return;
  next_send_ = now + interval_;
  ++beats_;
  for (Remote& remote : remotes_) {
    int done = 1;
    if (remote.send != MPI_REQUEST_NULL) MPI_Test(&remote.send, &done, MPI_STATUS_IGNORE);
    if (!done) continue;  // the last beat has not left yet: do not pile up
    remote.out = beats_;
    MPI_Isend(&remote.out, 1, MPI_UINT64_T, remote.rank, kHeartbeatTag, comm_, &remote.send);
  }
}

void PeerMonitor::check_node(std::vector<std::string>* why) {
  const int64_t now_ns = monotonic_ns();
  for (int p = 0; p < window_->local_size(); ++p) {
    if (p == window_->local_rank()) continue;
    const Board* peer = reinterpret_cast<const Board*>(window_->segment(p));
    const std::string who = "rank " + std::to_string(peer->rank) + " (pid " +
                            std::to_string(peer->pid) + " on this node)";
    if (pid_visible_[p] && kill(peer->pid, 0) != 0 && errno == ESRCH) {
      why->push_back(who + " has exited");
      continue;
    }
    const int64_t beat_ns = peer->beat_ns.load(std::memory_order_relaxed);
    const int64_t silent_ns = now_ns - std::max(beat_ns, traced_ns_[p]);
    if (silent_ns <= std::chrono::nanoseconds(timeout_).count()) continue;
    if (pid_visible_[p] && held_by_debugger(peer->pid)) {
      traced_ns_[p] = now_ns;  // a full timeout to beat again once released
      continue;
    }
    why->push_back(who + " has not been heard from for " + seconds(silent_ns * 1e-9) +
                   " (KOLO_PEER_TIMEOUT_SECONDS is " + seconds(timeout_.count() * 1e-3) + ")");
  }
}

Status PeerMonitor::check_remote(std::chrono::steady_clock::time_point now,
                                 std::vector<std::string>* why) {
  for (Remote& remote : remotes_) {
    for (;;) {  // drain what has arrived
      int arrived = 0;
      KOLO_MPI_CHECK(MPI_Test(&remote.recv, &arrived, MPI_STATUS_IGNORE));
      if (!arrived) break;
      remote.heard = now;
      KOLO_MPI_CHECK(MPI_Irecv(&remote.in, 1, MPI_UINT64_T, remote.rank, kHeartbeatTag, comm_,
                               &remote.recv));
    }
    const double silent = std::chrono::duration<double>(now - remote.heard).count();
    if (now - remote.heard > timeout_)
      why->push_back("rank " + std::to_string(remote.rank) + " (on another node) has not been heard from for " +
                     seconds(silent) + " (KOLO_PEER_TIMEOUT_SECONDS is " +
                     seconds(timeout_.count() * 1e-3) + ")");
  }
  return Status::OK();
}

}  // namespace kolo::mpi
