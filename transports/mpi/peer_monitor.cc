#include "transports/mpi/peer_monitor.h"

#include <random>

#include "common/check.h"
#include "common/logging.h"
#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {
namespace {

// How often check() does its work; between, it answers from one clock read.
constexpr auto kCheckEvery = std::chrono::milliseconds(1);

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
  return start_remote(node_ranks, &deadline);
}

// The ranks not on this node, watched by a TcpLiveness: rank 0 draws the job's
// token, every rank publishes its address, then the connections are made (each
// step bounded by `deadline`).
Status PeerMonitor::start_remote(const std::vector<int>& node_ranks, Liveness* deadline) {
  if (topology_.local_size == topology_.size) return Status::OK();
  std::vector<bool> on_node(topology_.size, false);
  for (int r : node_ranks) on_node[r] = true;
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

PeerMonitor::~PeerMonitor() {
  remote_.reset();  // its goodbye, unless a peer failed
  board_.reset();   // stops its beater
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status PeerMonitor::check() {
  if (!failed_.ok()) return failed_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return Status::OK();
  next_check_ = now + kCheckEvery;
  std::vector<std::string> why;
  if (board_) board_->find_failed(&why);  // beats for this rank too
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

Status PeerMonitor::check_now() {
  if (!failed_.ok()) return failed_;
  if (remote_) {
    Status remote = remote_->check_now();
    if (!remote.ok()) {
      failed_ = std::move(remote);
      record_peer_failure();
      return failed_;
    }
  }
  return check();
}

}  // namespace kolo::mpi
