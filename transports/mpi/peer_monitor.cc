#include "transports/mpi/peer_monitor.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include "common/check.h"
#include "common/logging.h"
#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {
namespace {

// How often check() does its work; between, it answers from one clock read.
constexpr auto kCheckEvery = std::chrono::milliseconds(1);

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
  KOLO_RETURN_IF_ERROR_AS_IS(start_remote(&deadline));
  if (window_) beater_ = std::thread([this] { beat_loop(); });
  return Status::OK();
}

// The ranks not on this node (the world ranks missing from the board), watched
// by a TcpLiveness: rank 0 draws the job's token, every rank publishes its
// address, then the connections are made (each step bounded by `deadline`).
Status PeerMonitor::start_remote(Liveness* deadline) {
  if (topology_.local_size == topology_.size) return Status::OK();
  std::vector<bool> on_node(topology_.size, false);
  on_node[topology_.rank] = true;
  if (window_) {
    for (int p = 0; p < window_->local_size(); ++p)
      on_node[reinterpret_cast<Board*>(window_->segment(p))->rank] = true;
  }
  uint64_t token = 0;
  if (topology_.rank == 0) {
    std::random_device device;
    token = (uint64_t{device()} << 32) ^ device();
  }
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Ibcast(&token, 1, MPI_UINT64_T, 0, comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, deadline));
  liveness::TcpLiveness::Options options;
  options.rank = topology_.rank;
  options.timeout = timeout_;
  options.token = token;
  options.on_verdict = record_peer_failure;  // Note [MPI_Finalize at exit] (mpi_world.cc)
  KOLO_RETURN_IF_ERROR_AS_IS(liveness::TcpLiveness::listen(options, &remote_));
  constexpr int kSlot = static_cast<int>(liveness::TcpLiveness::kMaxAddress) + 1;
  std::vector<char> mine(kSlot, '\0');
  std::vector<char> all(static_cast<size_t>(kSlot) * topology_.size, '\0');
  remote_->address().copy(mine.data(), kSlot - 1);
  KOLO_MPI_CHECK(MPI_Iallgather(mine.data(), kSlot, MPI_CHAR, all.data(), kSlot, MPI_CHAR, comm_,
                                &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, deadline));
  std::vector<liveness::TcpLiveness::Peer> peers;
  for (int r = 0; r < topology_.size; ++r)
    if (!on_node[r]) peers.push_back({r, std::string(all.data() + static_cast<size_t>(r) * kSlot)});
  return remote_->connect(peers);
}

void PeerMonitor::beat_loop() {
  std::unique_lock<std::mutex> lock(beater_mu_);
  while (!stopping_) {
    beat_node();
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
  remote_.reset();  // its goodbye, unless a peer failed
  int finalized = 0;
  MPI_Finalized(&finalized);
  window_.reset();  // frees collectively unless a peer failed (it asks failed())
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status PeerMonitor::check() {
  if (!failed_.ok()) return failed_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return Status::OK();
  next_check_ = now + kCheckEvery;
  beat_node();
  std::vector<std::string> why;
  if (window_) check_node(&why);
  if (why.empty() && remote_) {
    Status remote = remote_->check();  // its own verdict, or one a peer sent
    if (remote.ok()) return Status::OK();
    failed_ = std::move(remote);
    record_peer_failure();
    return failed_;
  }
  if (why.empty()) return Status::OK();
  std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
  for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
  failed_ = Status(Code::kRankFailed, message);
  record_peer_failure();
  if (remote_) remote_->declare(failed_);  // the other nodes' ranks end too
  return failed_;
}

// Also notes whether this process was away (stopped, starved) since the last
// beat: Note [Silence is counted only while this process listens].
void PeerMonitor::beat_node() {
  const int64_t now_ns = monotonic_ns();
  const int64_t last = last_alive_ns_.exchange(now_ns, std::memory_order_relaxed);
  const int64_t away = 2 * std::chrono::nanoseconds(interval_).count() + 50000000;
  if (last > 0 && now_ns - last > away) resumed_ns_.store(now_ns, std::memory_order_relaxed);
  if (!window_) return;
  Board* mine = reinterpret_cast<Board*>(window_->segment(window_->local_rank()));
  mine->beat_ns.store(now_ns, std::memory_order_relaxed);
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
    const int64_t since = std::max({beat_ns, traced_ns_[p], resumed_ns_.load(std::memory_order_relaxed)});
    const int64_t silent_ns = now_ns - since;
    if (silent_ns <= std::chrono::nanoseconds(timeout_).count()) continue;
    if (pid_visible_[p] && held_by_debugger(peer->pid)) {
      traced_ns_[p] = now_ns;  // a full timeout to beat again once released
      continue;
    }
    why->push_back(who + " has not been heard from for " + seconds(silent_ns * 1e-9) +
                   " (KOLO_PEER_TIMEOUT_SECONDS is " + seconds(timeout_.count() * 1e-3) + ")");
  }
}

}  // namespace kolo::mpi
