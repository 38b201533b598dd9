#include "transports/mpi/mpi_control_plane.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <random>
#include <string>

#include "common/check.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

// An MPI call of the control plane that fails while a peer fails is that peer's
// failure when liveness names it soon: Note [An MPI error while a peer fails]
// (mpi_wait.h). (UCX failed a doorbell's MPI_Isend with "Endpoint timeout" before
// kolo's side channel had read the killed peer's closed connection.)
#define KOLO_MPI_CHECK_PEERS(call)                                                   \
  do {                                                                               \
    const int kolo_mpi_rc_ = (call);                                                 \
    if (kolo_mpi_rc_ != MPI_SUCCESS)                                                 \
      return explain_mpi_error(mpi_error(kolo_mpi_rc_, #call, __FILE__, __LINE__), alive()); \
  } while (0)
namespace {

using transport::Bytes;

constexpr auto kShutdownWait = std::chrono::seconds(1);

// Offsets of each rank's blob in the gathered buffer. The sizes are the same on
// every rank that computes this, so every rank fails alike when they do not fit
// MPI's int counts.
Status displacements(const std::vector<int64_t>& sizes, std::vector<int>* counts,
                     std::vector<int>* displs, int64_t* total) {
  counts->resize(sizes.size());
  displs->resize(sizes.size());
  *total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || *total + sizes[i] > INT_MAX) {
      return invalid_argument("control plane blobs total more than INT_MAX bytes (rank " +
                              std::to_string(i) + " sent " + std::to_string(sizes[i]) + ")");
    }
    (*counts)[i] = static_cast<int>(sizes[i]);
    (*displs)[i] = static_cast<int>(*total);
    *total += sizes[i];
  }
  return Status::OK();
}

void split(const std::string& buffer, const std::vector<int>& counts,
           const std::vector<int>& displs, std::vector<Bytes>* all) {
  all->clear();
  all->reserve(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) all->push_back(buffer.substr(displs[i], counts[i]));
}

}  // namespace

MpiControlPlane::MpiControlPlane(SharedComms comms, const transport::Topology& topology)
    : comms_(std::move(comms)), comm_(comms_->control), topology_(topology),
      doorbell_in_(std::make_unique<Ring>()) {}

Status MpiControlPlane::create(SharedComms comms, const transport::Topology& topology,
                               std::unique_ptr<MpiControlPlane>* out) {
  std::unique_ptr<MpiControlPlane> plane(new MpiControlPlane(std::move(comms), topology));
  KOLO_RETURN_IF_ERROR(plane->find_node_peers());
  if (topology.size > 1) {
    KOLO_RETURN_IF_ERROR(plane->agree_on_session());
    KOLO_RETURN_IF_ERROR(plane->post_doorbell_receive());
  }
  *out = std::move(plane);
  return Status::OK();
}

Status MpiControlPlane::use_node(const std::shared_ptr<shm::Node>& node) {
  // Every rank the control communicator calls this node's must be in the node
  // layer's node too, or a ring would reach only some of them.
  if (node->local_size() != topology_.local_size)
    return internal_error("the node layer's node and the MPI node differ in size");
  if (topology_.local_size > 1) KOLO_RETURN_IF_ERROR(shm::NodeDoorbell::create(node, &node_));
  if (topology_.size > 1 && topology_.local_size == topology_.size)
    KOLO_RETURN_IF_ERROR(shm::NodeAnd::create(node, alive(), &node_and_));
  return Status::OK();
}

MpiControlPlane::~MpiControlPlane() {
  node_and_.reset();
  node_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  const bool peer_failed = alive() && alive()->failed();
  if (peer_failed) {  // Note [No MPI progress after a verdict] (mpi_wait.h): leak, untouched
    if (doorbell_recv_ != MPI_REQUEST_NULL) doorbell_in_.release();
    if (!ringings_.empty()) new std::list<Ringing>(std::move(ringings_));
    return;
  }
  if (doorbell_recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&doorbell_recv_);
    bool done = false;
    wait_for(&doorbell_recv_, kShutdownWait, &done).ignore();
    if (!done) {
      MPI_Request_free(&doorbell_recv_);
      doorbell_in_.release();  // MPI may still write into it: leak, never free under it
    }
  }
  release_ringings();
}

Status MpiControlPlane::allgather(const Bytes& mine, std::vector<Bytes>* all) {
  const int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(topology_.size);
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Iallgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_,
                                &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive()));

  std::vector<int> counts, displs;
  int64_t total = 0;
  KOLO_RETURN_IF_ERROR(displacements(sizes, &counts, &displs, &total));
  std::string buffer(static_cast<size_t>(total), '\0');
  KOLO_MPI_CHECK_PEERS(MPI_Iallgatherv(mine.data(), static_cast<int>(my_size), MPI_BYTE, buffer.data(),
                                 counts.data(), displs.data(), MPI_BYTE, comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive()));
  split(buffer, counts, displs, all);
  return Status::OK();
}

Status MpiControlPlane::gather(const Bytes& mine, std::vector<Bytes>* all, int root) {
  if (root < 0 || root >= topology_.size) {
    return invalid_argument("gather root " + std::to_string(root) + " outside 0.." +
                            std::to_string(topology_.size - 1));
  }
  const bool is_root = topology_.rank == root;
  const int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(is_root ? topology_.size : 0);
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Igather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, root,
                             comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive()));
  // Only the root knows every size, so a blob too big for an int count fails on
  // its own rank and on the root, not everywhere; either way the world is broken
  // (control blobs are kilobytes; see the contract in control_plane.h).
  if (my_size > INT_MAX) return invalid_argument("control plane blob over INT_MAX bytes");

  std::vector<int> counts, displs;
  int64_t total = 0;
  if (is_root) KOLO_RETURN_IF_ERROR(displacements(sizes, &counts, &displs, &total));
  std::string buffer(static_cast<size_t>(total), '\0');
  KOLO_MPI_CHECK_PEERS(MPI_Igatherv(mine.data(), static_cast<int>(my_size), MPI_BYTE, buffer.data(),
                              counts.data(), displs.data(), MPI_BYTE, root, comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive()));
  if (is_root) {
    split(buffer, counts, displs, all);
  } else {
    all->clear();
  }
  return Status::OK();
}

Status MpiControlPlane::broadcast(Bytes* blob, int root) {
  if (root < 0 || root >= topology_.size) {
    return invalid_argument("broadcast root " + std::to_string(root) + " outside 0.." +
                            std::to_string(topology_.size - 1));
  }
  uint64_t size = blob->size();
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Ibcast(&size, 1, MPI_UINT64_T, root, comm_, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive()));
  if (size > static_cast<uint64_t>(INT_MAX)) {
    return invalid_argument("broadcast blob of " + std::to_string(size) +
                            " bytes is over INT_MAX");
  }
  blob->resize(size);
  if (size == 0) return Status::OK();
  KOLO_MPI_CHECK_PEERS(MPI_Ibcast(blob->data(), static_cast<int>(size), MPI_BYTE, root, comm_,
                            &request));
  return wait(&request, alive());
}

Status MpiControlPlane::bitwise_and(std::vector<uint64_t>* bits) {
  if (bits->size() > static_cast<size_t>(INT_MAX)) {
    return invalid_argument("bitwise_and of more than INT_MAX words");
  }
  failpoint("negotiate");
  // Same length on every rank, so every rank takes the same branch.
  and_on_node_ = node_and_ && bits->size() <= shm::NodeAnd::kMaxWords;
  if (and_on_node_) return node_and_->run(bits);
  uint64_t unused = 0;  // MPI wants a valid address even for count 0
  void* data = bits->empty() ? &unused : bits->data();
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(bits->size()),
                                MPI_UINT64_T, MPI_BAND, comm_, &request));
  return wait(&request, alive());
}

Status MpiControlPlane::ring_and(uint64_t cycle, std::vector<uint64_t>* bits) {
  if (remote_peers_ > 0 || !node_ || !node_and_ || bits->size() > shm::NodeAnd::kMaxWords)
    return ControlPlane::ring_and(cycle, bits);
  failpoint("negotiate");
  and_on_node_ = true;
  shm::NodeAnd::RingLate<shm::NodeDoorbell> late{node_.get(), cycle};
  return node_and_->run(bits, &decltype(late)::ring, &late);
}

size_t MpiControlPlane::carry_capacity(size_t words, bool in_line) const {
  return node_and_ ? shm::NodeAnd::carry_capacity(words, in_line) : 0;
}

char* MpiControlPlane::carry_slot(size_t words, bool in_line) {
  return node_and_ ? node_and_->carry_slot(words, in_line) : nullptr;
}

bool MpiControlPlane::unanimous() const { return and_on_node_ && node_and_->unanimous(); }

const char* MpiControlPlane::carried(int rank) const {
  return node_and_ ? node_and_->carried(rank) : nullptr;
}

Status MpiControlPlane::barrier() {
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Ibarrier(comm_, &request));
  return wait(&request, alive());
}

Status MpiControlPlane::find_node_peers() {
  on_my_node_.assign(topology_.size, false);
  on_my_node_[topology_.rank] = true;
  remote_peers_ = topology_.size - 1;
  if (comms_->local == MPI_COMM_NULL) return Status::OK();  // no node: MPI rings only
  MPI_Group local_group, control_group;
  KOLO_MPI_CHECK(MPI_Comm_group(comms_->local, &local_group));
  KOLO_MPI_CHECK(MPI_Comm_group(comm_, &control_group));
  std::vector<int> local_ranks(topology_.local_size), control_ranks(topology_.local_size);
  for (int i = 0; i < topology_.local_size; ++i) local_ranks[i] = i;
  Status status = Status::OK();
  if (MPI_Group_translate_ranks(local_group, topology_.local_size, local_ranks.data(),
                                control_group, control_ranks.data()) != MPI_SUCCESS)
    status = transport_error("MPI_Group_translate_ranks failed");
  MPI_Group_free(&local_group);
  MPI_Group_free(&control_group);
  KOLO_RETURN_IF_ERROR(status);
  for (int r : control_ranks)
    if (r != MPI_UNDEFINED) on_my_node_[r] = true;
  remote_peers_ = topology_.size - topology_.local_size;
  return Status::OK();
}

// Note [Rings from an earlier plane]. Before the doorbell receive is posted.
Status MpiControlPlane::agree_on_session() {
  if (topology_.rank == 0) {
    std::random_device device;
    session_ = (uint64_t{device()} << 32) ^ device() ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  MPI_Request request;
  KOLO_MPI_CHECK_PEERS(MPI_Ibcast(&session_, 1, MPI_UINT64_T, 0, comm_, &request));
  return wait(&request, alive());
}

Status MpiControlPlane::ring(uint64_t cycle) {
  KOLO_RETURN_IF_ERROR(reap_ringings());
  if (node_) node_->ring(cycle);
  if (remote_peers_ == 0) return Status::OK();
  Ringing& ringing = ringings_.emplace_back();
  ringing.ring = Ring{session_, cycle};
  ringing.sends.reserve(remote_peers_);
  for (int peer = 0; peer < topology_.size; ++peer) {
    if (on_my_node_[peer]) continue;
    MPI_Request& request = ringing.sends.emplace_back(MPI_REQUEST_NULL);
    KOLO_MPI_CHECK_PEERS(MPI_Isend(&ringing.ring, 2, MPI_UINT64_T, peer, kDoorbellTag, comm_,
                             &request));
  }
  return Status::OK();
}

bool MpiControlPlane::rung(uint64_t cycle) {
  if (node_ && node_->rung(cycle)) return true;
  return remote_peers_ > 0 && mpi_rung(cycle);
}

void MpiControlPlane::wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                                    std::chrono::microseconds poll) {
  if (!node_) {
    ControlPlane::wait_for_ring(cycle, capped(timeout), poll);
    return;
  }
  if (remote_peers_ > 0) timeout = std::min(timeout, poll);
  timeout = capped(timeout);
  node_->wait(cycle, timeout, [&] { return remote_peers_ > 0 && mpi_rung(cycle); });
}

Status MpiControlPlane::check_peers() { return alive() ? alive()->check() : Status::OK(); }

std::chrono::microseconds MpiControlPlane::capped(std::chrono::microseconds timeout) const {
  if (!alive()) return timeout;
  return std::min<std::chrono::microseconds>(timeout, alive()->check_every());
}

void MpiControlPlane::wake() {
  if (node_) {
    node_->wake();
  } else {
    ControlPlane::wake();
  }
}

bool MpiControlPlane::mpi_rung(uint64_t cycle) {
  Status status = drain_doorbell();
  if (!status.ok()) {
    KOLO_LOG(kError) << "doorbell: " << status.to_string();
    return true;
  }
  return any_rung_ && highest_rung_ >= cycle;
}

Status MpiControlPlane::post_doorbell_receive() {
  KOLO_MPI_CHECK_PEERS(MPI_Irecv(doorbell_in_.get(), 2, MPI_UINT64_T, MPI_ANY_SOURCE, kDoorbellTag,
                           comm_, &doorbell_recv_));
  return Status::OK();
}

Status MpiControlPlane::drain_doorbell() {
  // No receive is posted in a world of one (and MPI_Test of a null request would
  // report it complete forever).
  while (doorbell_recv_ != MPI_REQUEST_NULL) {
    int arrived = 0;
    KOLO_MPI_CHECK_PEERS(MPI_Test(&doorbell_recv_, &arrived, MPI_STATUS_IGNORE));
    if (!arrived) break;
    const Ring heard = *doorbell_in_;
    if (heard.session == session_) {  // Note [Rings from an earlier plane]
      highest_rung_ = any_rung_ ? std::max(highest_rung_, heard.cycle) : heard.cycle;
      any_rung_ = true;
    }
    KOLO_RETURN_IF_ERROR(post_doorbell_receive());
  }
  return Status::OK();
}

Status MpiControlPlane::reap_ringings() {
  for (auto it = ringings_.begin(); it != ringings_.end();) {
    int done = 0;
    KOLO_MPI_CHECK_PEERS(MPI_Testall(static_cast<int>(it->sends.size()), it->sends.data(), &done,
                               MPI_STATUSES_IGNORE));
    it = done ? ringings_.erase(it) : std::next(it);
  }
  return Status::OK();
}

void MpiControlPlane::release_ringings() {
  const auto deadline = std::chrono::steady_clock::now() + kShutdownWait;
  bool all_done = true;
  for (Ringing& ringing : ringings_) {
    for (MPI_Request& request : ringing.sends) {
      bool done = false;
      auto left = std::max(deadline - std::chrono::steady_clock::now(),
                           std::chrono::steady_clock::duration::zero());
      wait_for(&request, left, &done).ignore();
      if (!done && request != MPI_REQUEST_NULL) {
        MPI_Request_free(&request);
        all_done = false;
      }
    }
  }
  // A send MPI still owns keeps its buffer: hand the nodes to a list nobody frees.
  if (!all_done) new std::list<Ringing>(std::move(ringings_));
  ringings_.clear();
}

}  // namespace kolo::mpi
