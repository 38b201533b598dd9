// The "mpi" transport's collectives other than allreduce, on MPI's nonblocking
// collectives: allgather -> MPI_Iallgatherv, broadcast -> MPI_Ibcast (in place on
// the output), alltoall -> MPI_Ialltoallv, reducescatter -> MPI_Ireduce_scatter.
// Types and ops are the allreduce's (mpi_transport.h): predefined where MPI has
// them, kolo's user ops for float16 / bfloat16, logical ops for bool. Every request
// finishes with the polite wait (mpi_wait.h); nothing here blocks in MPI.
//
// Aliasing: MPI forbids a send buffer that overlaps the receive buffer, so
//   allgather whose input is its own block of the output  -> MPI_IN_PLACE;
//   reducescatter with input == output                    -> MPI_IN_PLACE;
//   any other overlap (allgather, alltoall, reducescatter) -> the input is copied
//   first (a rare case; the coordinator never asks for it);
//   broadcast: the root copies input to output, then MPI_Ibcast on the output.
//
// Note [Counts above INT_MAX]
// MPI's collectives take int counts and displacements (elements); kolo's are
// int64. The limit is max_count_per_call_ (INT_MAX; tests lower it):
// - broadcast: consecutive slices of at most the limit, one MPI_Ibcast each, all
//   posted at once and waited together (as the allreduce does).
// - allgather, alltoall: each side (send, receive) counts in blocks of b elements,
//   a contiguous derived datatype, where b is the largest divisor of the gcd of
//   that side's counts that is at most the limit. MPI matches type signatures in
//   basic elements, so each side and each rank may choose its own b. If no b makes
//   every count and displacement fit, the answer is Unsupported. For allgather all
//   ranks hold the same counts and answer alike; for alltoall a rank sees only its
//   own row and column, so such counts (above 2^31 elements on one rank, with no
//   common divisor) could leave peers waiting — the price of not exchanging counts.
// - reducescatter: MPI's predefined ops work on predefined types only, so there is
//   no block type: every count and their sum must fit, else Unsupported (the same
//   on every rank: the counts are).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "transport/reduction.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_work.h"

namespace kolo::mpi {
namespace {

using transport::CollectiveView;

// One side of a v-collective in MPI's terms: its datatype (the base type, or a
// block of `block` base elements) and int counts and displacements in that type.
struct Side {
  int64_t block = 1;
  std::vector<int> counts;
  std::vector<int> displs;
};

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

int64_t sum_before(const std::vector<int64_t>& counts, size_t end) {
  return std::accumulate(counts.begin(), counts.begin() + end, int64_t{0});
}

int64_t total(const std::vector<int64_t>& counts) { return sum_before(counts, counts.size()); }

// The largest divisor of g (> 0) that is at most limit.
int64_t largest_divisor_at_most(int64_t g, int64_t limit) {
  int64_t best = 1;
  for (int64_t d = 1; d * d <= g; ++d) {
    if (g % d != 0) continue;
    if (d <= limit) best = std::max(best, d);
    if (g / d <= limit) best = std::max(best, g / d);
  }
  return best;
}

// Expresses counts (and their displacements) in blocks that fit in `limit`; false if
// no block size does. See Note [Counts above INT_MAX].
bool make_side(const std::vector<int64_t>& counts, int64_t limit, Side* side) {
  int64_t g = 0, largest = 0;
  for (int64_t c : counts) g = std::gcd(g, c);
  for (int64_t c : counts) largest = std::max(largest, c);
  const int64_t last_displ = total(counts) - (counts.empty() ? 0 : counts.back());
  side->block = 1;
  if (std::max(largest, last_displ) > limit && g > 1) {
    side->block = largest_divisor_at_most(g, limit);
  }
  if (largest / side->block > limit || last_displ / side->block > limit) return false;
  int64_t displ = 0;
  side->counts.clear();
  side->displs.clear();
  for (int64_t c : counts) {
    side->counts.push_back(static_cast<int>(c / side->block));
    side->displs.push_back(static_cast<int>(displ / side->block));
    displ += c;
  }
  return true;
}

Status check_counts(const char* field, const std::vector<int64_t>& counts, int size) {
  bool ok = counts.size() == static_cast<size_t>(size);
  for (int64_t c : counts) ok = ok && c >= 0;
  if (ok) return Status::OK();
  return invalid_argument(std::string("mpi: ") + field + " needs one count >= 0 for each of " +
                          std::to_string(size) + " ranks, got " + std::to_string(counts.size()));
}

// The requests of one collective, and what MPI reads until they complete (the
// count arrays, a copy of an aliased input).
class CollectiveWork : public MpiWork {
 public:
  explicit CollectiveWork(Liveness* alive) : MpiWork(alive) {}
  ~CollectiveWork() override {
    finish();  // before the buffers below go
    if (abandoned()) {  // MPI may still write into them: leak
      new Side(std::move(send_));
      new Side(std::move(recv_));
      new std::vector<char>(std::move(input_copy_));
    }
  }

  Side send_, recv_;
  std::vector<char> input_copy_;
};

// A contiguous type of `block` elements of `base` (committed), or base itself.
Status block_type(MPI_Datatype base, int64_t block, MPI_Datatype* type) {
  *type = base;
  if (block == 1) return Status::OK();
  KOLO_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(block), base, type));
  KOLO_MPI_CHECK(MPI_Type_commit(type));
  return Status::OK();
}

void free_block_type(MPI_Datatype base, MPI_Datatype* type) {
  // Freeing a type that a pending operation uses is allowed: MPI frees it after.
  if (*type != base && *type != MPI_DATATYPE_NULL) MPI_Type_free(type);
}

// Where the input comes from: the caller's buffer, or a copy if it overlaps output.
const void* unaliased_input(CollectiveWork* work, const void* input, size_t in_bytes,
                            const void* output, size_t out_bytes) {
  if (!overlaps(input, in_bytes, output, out_bytes)) return input;
  const char* in = static_cast<const char*>(input);
  work->input_copy_.assign(in, in + in_bytes);
  return work->input_copy_.data();
}

// Builds the block types of work's send and receive sides, posts one request
// with them (`post` returns MPI's error code), frees the types (a pending request
// keeps what it needs) and adds the request to `work`. `what` names the call.
template <typename Post>
Status post_with_block_types(CollectiveWork* work, MPI_Datatype base, const char* what,
                             Post post) {
  MPI_Datatype send_type = MPI_DATATYPE_NULL, recv_type = MPI_DATATYPE_NULL;
  Status s = block_type(base, work->send_.block, &send_type);
  if (s.ok()) s = block_type(base, work->recv_.block, &recv_type);
  MPI_Request request = MPI_REQUEST_NULL;
  if (s.ok()) {
    const int rc = post(send_type, recv_type, &request);
    if (rc != MPI_SUCCESS) s = mpi_error(rc, what, __FILE__, __LINE__);
  }
  free_block_type(base, &send_type);
  free_block_type(base, &recv_type);
  work->add(request);
  return s;
}

Status start_allgather(CollectiveWork* work, const CollectiveView& v, MPI_Datatype base,
                       int64_t limit, int rank, MPI_Comm comm) {
  const size_t elem = dtype_size(v.dtype);
  const int64_t mine = v.recv_counts[rank];
  char* out = static_cast<char*>(v.output);
  const size_t out_bytes = static_cast<size_t>(total(v.recv_counts)) * elem;
  const void* own_block = out + static_cast<size_t>(sum_before(v.recv_counts, rank)) * elem;
  const bool in_place = v.input == own_block;
  KOLO_CHECK(make_side({mine}, limit, &work->send_));
  KOLO_CHECK(make_side(v.recv_counts, limit, &work->recv_));
  const void* input =
      in_place ? MPI_IN_PLACE
               : unaliased_input(work, v.input, static_cast<size_t>(mine) * elem, out, out_bytes);
  return post_with_block_types(
      work, base, "MPI_Iallgatherv", [&](MPI_Datatype send, MPI_Datatype recv, MPI_Request* r) {
        return MPI_Iallgatherv(input, work->send_.counts[0], send, out, work->recv_.counts.data(),
                               work->recv_.displs.data(), recv, comm, r);
      });
}

Status start_alltoall(CollectiveWork* work, const CollectiveView& v, MPI_Datatype base,
                      int64_t limit, MPI_Comm comm) {
  const size_t elem = dtype_size(v.dtype);
  KOLO_CHECK(make_side(v.send_counts, limit, &work->send_));
  KOLO_CHECK(make_side(v.recv_counts, limit, &work->recv_));
  const void* input =
      unaliased_input(work, v.input, static_cast<size_t>(total(v.send_counts)) * elem, v.output,
                      static_cast<size_t>(total(v.recv_counts)) * elem);
  return post_with_block_types(
      work, base, "MPI_Ialltoallv", [&](MPI_Datatype send, MPI_Datatype recv, MPI_Request* r) {
        return MPI_Ialltoallv(input, work->send_.counts.data(), work->send_.displs.data(), send,
                              v.output, work->recv_.counts.data(), work->recv_.displs.data(),
                              recv, comm, r);
      });
}

void start_broadcast(CollectiveWork* work, const CollectiveView& v, MPI_Datatype type,
                     int64_t limit, int rank, MPI_Comm comm) {
  const size_t elem = dtype_size(v.dtype);
  char* out = static_cast<char*>(v.output);
  if (rank == v.root && v.input != v.output && v.count > 0) {
    std::memmove(out, v.input, static_cast<size_t>(v.count) * elem);
  }
  for (int64_t offset = 0; offset < v.count; offset += limit) {
    const int count = static_cast<int>(std::min(limit, v.count - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Ibcast(out + static_cast<size_t>(offset) * elem, count, type, v.root,
                              comm, &request);
    if (rc != MPI_SUCCESS) {
      work->fail(mpi_error(rc, "MPI_Ibcast", __FILE__, __LINE__));
      return;
    }
    work->add(request);
  }
}

Status start_reducescatter(CollectiveWork* work, const CollectiveView& v, MPI_Datatype type,
                           MPI_Op op, int rank, MPI_Comm comm) {
  const size_t elem = dtype_size(v.dtype);
  const size_t in_bytes = static_cast<size_t>(total(v.recv_counts)) * elem;
  const size_t out_bytes = static_cast<size_t>(v.recv_counts[rank]) * elem;
  const bool in_place = v.input == v.output;
  const void* input =
      in_place ? MPI_IN_PLACE : unaliased_input(work, v.input, in_bytes, v.output, out_bytes);
  for (int64_t c : v.recv_counts) work->recv_.counts.push_back(static_cast<int>(c));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ireduce_scatter(input, v.output, work->recv_.counts.data(), type, op, comm,
                                     &request);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ireduce_scatter", __FILE__, __LINE__);
  work->add(request);
  return Status::OK();
}

}  // namespace

Status MpiTransport::supports_collective(Collective op, const CollectiveView& view) const {
  const std::string what = std::string("mpi ") + collective_name(op);
  if (view.device.kind != DeviceKind::kCpu) {
    return unsupported(what + ": CPU memory only, not " + device_name(view.device));
  }
  if (!is_valid(view.dtype)) return unsupported(what + ": invalid dtype " + dtype_name(view.dtype));
  int size = 0;
  KOLO_MPI_CHECK(MPI_Comm_size(comm_, &size));
  const std::string too_large =
      what + ": counts or displacements above " + std::to_string(max_count_per_call_) +
      " elements with no common block size (Note [Counts above INT_MAX])";
  Side side;
  switch (op) {
    case Collective::kBroadcast:
      if (view.root < 0 || view.root >= size || view.count < 0) {
        return invalid_argument(what + ": root " + std::to_string(view.root) + " count " +
                                std::to_string(view.count) + " in a world of " +
                                std::to_string(size));
      }
      return Status::OK();
    case Collective::kAllgather:
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts("allgather recv_counts", view.recv_counts, size));
      return make_side(view.recv_counts, max_count_per_call_, &side) ? Status::OK()
                                                                     : unsupported(too_large);
    case Collective::kAlltoall:
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts("alltoall send_counts", view.send_counts, size));
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts("alltoall recv_counts", view.recv_counts, size));
      return make_side(view.send_counts, max_count_per_call_, &side) &&
                     make_side(view.recv_counts, max_count_per_call_, &side)
                 ? Status::OK()
                 : unsupported(too_large);
    case Collective::kReducescatter:
      if (!is_elementwise(view.reduction.op)) {
        return unsupported(what + ": sum, min, max or product, not " +
                           op_name(view.reduction.op) + " (decide_reduction turns average into sum)");
      }
      KOLO_RETURN_IF_ERROR_AS_IS(
          check_counts("reducescatter recv_counts", view.recv_counts, size));
      if (total(view.recv_counts) > max_count_per_call_) {
        return unsupported(what + ": " + std::to_string(total(view.recv_counts)) +
                           " elements in all; MPI's reductions take at most " +
                           std::to_string(max_count_per_call_) +
                           " (Note [Counts above INT_MAX])");
      }
      return Status::OK();
    default:
      return internal_error(what + ": not a transport collective");
  }
}

std::unique_ptr<transport::Work> MpiTransport::collective(Collective op,
                                                          const CollectiveView& view) {
  Status supported = supports_collective(op, view);
  if (!supported.ok()) return std::make_unique<transport::CompletedWork>(supported);
  int rank = 0;
  const int rc = MPI_Comm_rank(comm_, &rank);
  if (rc != MPI_SUCCESS) {
    return std::make_unique<transport::CompletedWork>(
        mpi_error(rc, "MPI_Comm_rank", __FILE__, __LINE__));
  }
  if (op != Collective::kReducescatter) return start(op, view, rank);
  // MPI applies no factor: the shared helper does (transport/reduction.h).
  return transport::scaled_reducescatter(
      view, rank, &scratch_, [&](const CollectiveView& v) { return start(op, v, rank); });
}

std::unique_ptr<transport::Work> MpiTransport::start(Collective op, const CollectiveView& view,
                                                     int rank) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  // The op matters only for reducescatter; the others take the type alone.
  mpi_type_and_op(view.dtype, op == Collective::kReducescatter ? view.reduction.op : ReduceOp::kSum,
                  &type, &mpi_op);
  auto work = std::make_unique<CollectiveWork>(comms_->liveness.get());
  Status started;
  switch (op) {
    case Collective::kAllgather:
      started = start_allgather(work.get(), view, type, max_count_per_call_, rank, comm_);
      break;
    case Collective::kBroadcast:
      start_broadcast(work.get(), view, type, max_count_per_call_, rank, comm_);
      break;
    case Collective::kAlltoall:
      started = start_alltoall(work.get(), view, type, max_count_per_call_, comm_);
      break;
    case Collective::kReducescatter:
      if (total(view.recv_counts) > 0) {
        started = start_reducescatter(work.get(), view, type, mpi_op, rank, comm_);
      }
      break;
    default:
      started = internal_error(std::string("mpi ") + collective_name(op) +
                               ": not a transport collective");
      break;
  }
  if (!started.ok()) work->fail(started);
  return work;
}

}  // namespace kolo::mpi
