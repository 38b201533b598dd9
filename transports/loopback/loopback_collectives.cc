// See loopback_collectives.h for the two-rendezvous scheme. Vocabulary: a rank's
// *call* is what it published (input pointer, dtype, counts, root, op); a *block*
// is one rank's run of elements in a rank-ordered layout, found at its
// *displacement* (the sum of the counts before it).
#include "transports/loopback/loopback_collectives.h"

#include <cstring>
#include <string>
#include <utility>

#include "common/check.h"
#include "reduce/reduce.h"

namespace kolo::loopback {
namespace {

using transport::CollectiveView;

// The fixed part of a published call; send_counts then recv_counts follow it.
struct CallHeader {
  const void* input;
  int64_t count;
  DataType dtype;
  ReduceOp op;
  int32_t root;
  int32_t num_send;
  int32_t num_recv;
};

struct Call {
  const char* input = nullptr;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::vector<int64_t> send;
  std::vector<int64_t> recv;
};

Bytes encode(const CollectiveView& v) {
  const CallHeader h{v.input,
                     v.count,
                     v.dtype,
                     v.reduction.op,
                     v.root,
                     static_cast<int32_t>(v.send_counts.size()),
                     static_cast<int32_t>(v.recv_counts.size())};
  Bytes blob(reinterpret_cast<const char*>(&h), sizeof(h));
  blob.append(reinterpret_cast<const char*>(v.send_counts.data()),
              v.send_counts.size() * sizeof(int64_t));
  blob.append(reinterpret_cast<const char*>(v.recv_counts.data()),
              v.recv_counts.size() * sizeof(int64_t));
  return blob;
}

Call decode(const Bytes& blob) {
  CallHeader h;
  KOLO_CHECK_GE(blob.size(), sizeof(h));
  std::memcpy(&h, blob.data(), sizeof(h));
  KOLO_CHECK_EQ(blob.size(), sizeof(h) + (h.num_send + h.num_recv) * sizeof(int64_t));
  Call c;
  c.input = static_cast<const char*>(h.input);
  c.count = h.count;
  c.dtype = h.dtype;
  c.op = h.op;
  c.root = h.root;
  c.send.resize(h.num_send);
  c.recv.resize(h.num_recv);
  const char* counts = blob.data() + sizeof(h);
  // An empty vector's data() may be NULL, which memcpy must not get even for 0 bytes.
  if (!c.send.empty()) std::memcpy(c.send.data(), counts, c.send.size() * sizeof(int64_t));
  if (!c.recv.empty())
    std::memcpy(c.recv.data(), counts + c.send.size() * sizeof(int64_t),
                c.recv.size() * sizeof(int64_t));
  return c;
}

Status mismatch(Collective op, const std::string& what) {
  return Status(Code::kMismatch, std::string("loopback ") + collective_name(op) + ": " + what);
}

std::string counts_string(const std::vector<int64_t>& counts) {
  std::string s = "[";
  for (size_t i = 0; i < counts.size(); ++i) s += (i ? "," : "") + std::to_string(counts[i]);
  return s + "]";
}

// One count per rank, none negative.
Status check_counts(Collective op, const char* field, int rank,
                    const std::vector<int64_t>& counts, int size) {
  bool ok = counts.size() == static_cast<size_t>(size);
  for (int64_t c : counts) ok = ok && c >= 0;
  if (ok) return Status::OK();
  return mismatch(op, "rank " + std::to_string(rank) + "'s " + field + " " +
                          counts_string(counts) + " is not one count >= 0 per rank of " +
                          std::to_string(size));
}

// Counts that must be the same on every rank (allgather, reducescatter).
Status check_same_recv_counts(Collective op, const std::vector<Call>& calls) {
  const int size = static_cast<int>(calls.size());
  for (int r = 0; r < size; ++r) {
    KOLO_RETURN_IF_ERROR_AS_IS(check_counts(op, "recv_counts", r, calls[r].recv, size));
    if (calls[r].recv != calls[0].recv) {
      return mismatch(op, "recv_counts " + counts_string(calls[0].recv) + " on rank 0, " +
                              counts_string(calls[r].recv) + " on rank " + std::to_string(r));
    }
  }
  return Status::OK();
}

// Every rank computes the same verdict: it looks only at the published calls.
Status check_agreement(Collective op, const std::vector<Call>& calls) {
  const int size = static_cast<int>(calls.size());
  for (int r = 1; r < size; ++r) {
    if (calls[r].dtype != calls[0].dtype) {
      return mismatch(op, "dtype " + dtype_name(calls[0].dtype) + " on rank 0, " +
                              dtype_name(calls[r].dtype) + " on rank " + std::to_string(r));
    }
  }
  switch (op) {
    case Collective::kAllgather: return check_same_recv_counts(op, calls);
    case Collective::kReducescatter:
      for (int r = 1; r < size; ++r) {
        if (calls[r].op != calls[0].op) {
          return mismatch(op, "op " + op_name(calls[0].op) + " on rank 0, " +
                                  op_name(calls[r].op) + " on rank " + std::to_string(r));
        }
      }
      return check_same_recv_counts(op, calls);
    case Collective::kBroadcast:
      for (int r = 0; r < size; ++r) {
        const Call& c = calls[r];
        if (c.root != calls[0].root || c.count != calls[0].count) {
          return mismatch(op, "root " + std::to_string(calls[0].root) + " count " +
                                  std::to_string(calls[0].count) + " on rank 0, root " +
                                  std::to_string(c.root) + " count " + std::to_string(c.count) +
                                  " on rank " + std::to_string(r));
        }
      }
      if (calls[0].root < 0 || calls[0].root >= size || calls[0].count < 0) {
        return mismatch(op, "root " + std::to_string(calls[0].root) + " count " +
                                std::to_string(calls[0].count) + " in a world of " +
                                std::to_string(size));
      }
      return Status::OK();
    case Collective::kAlltoall:
      for (int r = 0; r < size; ++r) {
        KOLO_RETURN_IF_ERROR_AS_IS(check_counts(op, "send_counts", r, calls[r].send, size));
        KOLO_RETURN_IF_ERROR_AS_IS(check_counts(op, "recv_counts", r, calls[r].recv, size));
      }
      for (int s = 0; s < size; ++s) {
        for (int d = 0; d < size; ++d) {
          if (calls[s].send[d] != calls[d].recv[s]) {
            return mismatch(op, "rank " + std::to_string(s) + " sends " +
                                    std::to_string(calls[s].send[d]) + " elements to rank " +
                                    std::to_string(d) + ", which expects " +
                                    std::to_string(calls[d].recv[s]));
          }
        }
      }
      return Status::OK();
    default:
      return internal_error(std::string("loopback ") + collective_name(op) +
                            ": not a transport collective");
  }
}

int64_t sum_before(const std::vector<int64_t>& counts, int end) {
  int64_t sum = 0;
  for (int i = 0; i < end; ++i) sum += counts[i];
  return sum;
}

// How many elements of rank r's input the collective reads (by anyone).
int64_t input_read(Collective op, const std::vector<Call>& calls, int r) {
  const int size = static_cast<int>(calls.size());
  switch (op) {
    case Collective::kAllgather: return calls[r].recv[r];
    case Collective::kBroadcast: return r == calls[r].root ? calls[r].count : 0;
    case Collective::kAlltoall: return sum_before(calls[r].send, size);
    case Collective::kReducescatter: return sum_before(calls[r].recv, size);
    default:
      KOLO_UNREACHABLE("loopback: not a transport collective (check_agreement() turns it away)");
  }
  return 0;
}

// How many elements this rank's output receives.
int64_t output_count(Collective op, const Call& mine, int rank) {
  switch (op) {
    case Collective::kAllgather:
    case Collective::kAlltoall: return sum_before(mine.recv, static_cast<int>(mine.recv.size()));
    case Collective::kBroadcast: return mine.count;
    case Collective::kReducescatter: return mine.recv[rank];
    default:
      KOLO_UNREACHABLE("loopback: not a transport collective (check_agreement() turns it away)");
  }
  return 0;
}

// Writes this rank's result to `out`, reading the peers' inputs.
void compute(Collective op, const std::vector<Call>& calls, int rank, char* out) {
  const int size = static_cast<int>(calls.size());
  const Call& mine = calls[rank];
  const size_t elem = dtype_size(mine.dtype);
  auto bytes = [elem](int64_t elements) { return static_cast<size_t>(elements) * elem; };
  switch (op) {
    case Collective::kAllgather:
      for (int r = 0; r < size; ++r) {
        if (mine.recv[r] > 0)
          std::memcpy(out + bytes(sum_before(mine.recv, r)), calls[r].input, bytes(mine.recv[r]));
      }
      return;
    case Collective::kBroadcast:
      if (mine.count > 0) std::memcpy(out, calls[mine.root].input, bytes(mine.count));
      return;
    case Collective::kAlltoall:
      for (int s = 0; s < size; ++s) {
        if (mine.recv[s] > 0)
          std::memcpy(out + bytes(sum_before(mine.recv, s)),
                      calls[s].input + bytes(sum_before(calls[s].send, rank)),
                      bytes(mine.recv[s]));
      }
      return;
    case Collective::kReducescatter: {
      const int64_t n = mine.recv[rank];
      if (n == 0) return;
      const size_t offset = bytes(sum_before(mine.recv, rank));
      std::memcpy(out, calls[0].input + offset, bytes(n));
      for (int r = 1; r < size; ++r) {
        reduce::reduce(out, out, calls[r].input + offset, n, mine.dtype, mine.op);
      }
      return;
    }
    default:
      KOLO_UNREACHABLE("loopback: not a transport collective (check_agreement() turns it away)");
  }
}

bool overlaps(const char* a, size_t a_bytes, const char* b, size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

Status check_collective(Collective op, const CollectiveView& view) {
  if (view.device.kind != DeviceKind::kCpu) {
    return unsupported("loopback: CPU memory only, the " + std::string(collective_name(op)) +
                       " is on " + device_name(view.device));
  }
  if (!is_valid(view.dtype)) return unsupported("loopback: invalid dtype " + dtype_name(view.dtype));
  if (op == Collective::kReducescatter &&
      !is_elementwise(view.reduction.op)) {
    return unsupported("loopback: reducescatter with sum, min, max or product, not " +
                       op_name(view.reduction.op) + " (decide_reduction turns average into sum)");
  }
  return Status::OK();
}

Status run_collective(Rendezvous& rendezvous, int rank, int size, Collective op,
                      const CollectiveView& view, std::vector<char>* scratch) {
  KOLO_RETURN_IF_ERROR(check_collective(op, view));
  std::vector<Bytes> blobs;
  KOLO_RETURN_IF_ERROR(rendezvous.exchange(rank, collective_name(op), encode(view), &blobs));
  KOLO_CHECK_EQ(blobs.size(), static_cast<size_t>(size));
  std::vector<Call> calls;
  calls.reserve(size);
  for (const Bytes& blob : blobs) calls.push_back(decode(blob));
  KOLO_RETURN_IF_ERROR_AS_IS(check_agreement(op, calls));

  const Call& mine = calls[rank];
  const size_t elem = dtype_size(mine.dtype);
  char* out = static_cast<char*>(view.output);
  const size_t out_bytes = static_cast<size_t>(output_count(op, mine, rank)) * elem;
  // A broadcast root whose output is its input has nothing to write.
  const bool nothing_to_write = op == Collective::kBroadcast && out == calls[mine.root].input;
  bool in_place = false;
  for (int r = 0; r < size; ++r) {
    const size_t read = static_cast<size_t>(input_read(op, calls, r)) * elem;
    in_place = in_place || overlaps(out, out_bytes, calls[r].input, read);
  }
  in_place = in_place && !nothing_to_write;
  if (in_place && scratch->size() < out_bytes) scratch->resize(out_bytes);
  if (!nothing_to_write) compute(op, calls, rank, in_place ? scratch->data() : out);
  // Nobody returns (and lets its input go) before everyone has read it.
  KOLO_RETURN_IF_ERROR(rendezvous.exchange(rank, "collective done", Bytes(), nullptr));
  if (in_place) std::memcpy(out, scratch->data(), out_bytes);
  return Status::OK();
}

}  // namespace kolo::loopback
