#include "transports/mpi/peer_monitor.h"

#include <algorithm>
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

std::string seconds(double s) {
  std::ostringstream os;
  os.precision(3);
  os << s << " s";
  return os.str();
}

}  // namespace

PeerMonitor::PeerMonitor(std::chrono::milliseconds timeout, const transport::Topology& topology)
    : timeout_(timeout), interval_(shm::beat_interval(timeout)), topology_(topology) {}

Status PeerMonitor::create(MPI_Comm control, const transport::Topology& topology,
                           std::shared_ptr<shm::Node> node, std::chrono::milliseconds timeout,
                           std::unique_ptr<PeerMonitor>* out) {
  if (timeout.count() <= 0) return invalid_argument("peer timeout must be positive");
  std::unique_ptr<PeerMonitor> monitor(new PeerMonitor(timeout, topology));
  KOLO_RETURN_IF_ERROR_AS_IS(monitor->start(control, node));
  *out = std::move(monitor);
  return Status::OK();
}

Status PeerMonitor::start(MPI_Comm control, const std::shared_ptr<shm::Node>& node) {
  Deadline deadline(timeout_, "kolo_init (starting the peer monitor)");
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Comm_idup(control, &comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, &deadline));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  std::vector<int> node_ranks = {topology_.rank};
  if (node && node->local_size() > 1) {
    KOLO_RETURN_IF_ERROR(shm::NodeBoard::create(node, timeout_, &board_));
    node_ranks = node->world_ranks();
  }
  KOLO_RETURN_IF_ERROR_AS_IS(start_remote(node_ranks));
  if (thread_sends_ && !remotes_.empty()) beater_ = std::thread([this] { beat_loop(); });
  return Status::OK();
}

// The ranks not on this node.
Status PeerMonitor::start_remote(const std::vector<int>& node_ranks) {
  if (topology_.local_size == topology_.size) return Status::OK();
  std::vector<bool> on_node(topology_.size, false);
  for (int r : node_ranks) on_node[r] = true;
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
    send_remote(std::chrono::steady_clock::now());
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
  board_.reset();
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
  if (!thread_sends_) send_remote(now);
  std::vector<std::string> why;
  if (board_) board_->find_failed(&why);  // beats for this rank too
  KOLO_RETURN_IF_ERROR(check_remote(now, &why));
  if (why.empty()) return Status::OK();
  std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
  for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
  failed_ = Status(Code::kRankFailed, message);
  record_peer_failure();
  return failed_;
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
