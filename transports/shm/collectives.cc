// Allgather(v), broadcast, alltoall(v) and reducescatter inside one node.
//
// The ranks of a node share one segment (node.h). Each rank's collectives region
// holds a control block of two counters, each on its own cache line, then two
// (header, slot) pairs:
//
//   region(r):  [posted | done]  [header 0][slot 0]  [header 1][slot 1]
//
// A collective runs in rounds; round g (numbered across calls, the same on every
// rank) uses pair g % 2, so a fast rank fills one slot while a slow one still
// reads the other. In round g rank r
//
//   1. waits until every peer's done >= g - 1 (nobody still reads pair g % 2),
//      writes its part of the round into its slot (and, in a call's first round,
//      a header describing its view of the call), then posted = g + 1;
//   2. waits until the peers it reads from have posted >= g + 1, copies (or
//      reduces) their parts from their slots into its output, then done = g + 1.
//
// Step 1 of round g + 1 runs before step 2 of round g (as in allreduce.cc,
// Note [Pipelined slices]). What a round carries, with n local ranks and a slot
// of S bytes:
//
//   allgather      each rank: the next S bytes of its own block; every rank copies
//                  each peer's piece to that peer's displacement in its output.
//   broadcast      the root: the next S bytes of its buffer; the others copy it.
//   alltoall       each rank: for each peer d, the next S/(n-1) bytes of its block
//                  for d, in region d of its slot; d copies it out.
//   reducescatter  each rank: for each peer d, the next S/(n-1) bytes of block d of
//                  its input (prescaled on the way); d reduces its own input with
//                  the peers' pieces straight into its output, then applies the
//                  output factor there, in cache.
//
// Every byte crosses between cores once: written by its owner into the owner's
// slot (which stays in cache), read by its reader into the final output. A
// rank's own block goes to the slot and its output in one pass (Note [One pass
// over the own block]); large outputs are streamed (Note [Streaming the
// output]). A call needs as many rounds as its largest piece; every rank
// computes the same number from the headers. Allgathers and alltoalls of 64 KiB
// to 16 MiB per rank skip the slots where the node allows one-copy reads: one
// round of headers, then each rank reads its peers' blocks straight from their
// inputs (Note [One pass from the peers' inputs] in collectives_choices.cc).
// Calls of 1 MiB or more whose every source lies in kolo_alloc memory read the
// peers' buffers mapped, after the first round (Note [The peers' sources in
// kolo memory]).
//
// The headers: in its first round each rank publishes op, dtype, root, count,
// reduce op and its counts (alltoall: its row and its column). After that round
// every rank reads every header, so every rank reaches the same verdict: either
// the views agree, or every rank returns the same error and the call ends after
// that one round (the engine stays in step). Alltoall needs the headers anyway:
// a rank knows only its own row and column, not the largest piece of the call.
#include "transports/shm/collectives.h"

#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/failpoint.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"
#include "transports/shm/collectives_call.h"
#include "transports/shm/counter.h"
#include "transports/shm/pass.h"

namespace kolo::shm {
namespace {

using transport::CollectiveView;

using namespace collectives_layout;  // NOLINT: the engine's own layout (shm_collectives_call.h)
const char* const kFieldNames[] = {"collective", "dtype", "root", "count", "reduce op"};

// Note [Collective slot size]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// 1 MiB: fewer rounds save each round's two counter hand-offs, and broadcast,
// whose rounds are a chain from the root, gains most; past 1 MiB a slot pair no
// longer fits a 2 MiB L2 and the other collectives slow down. The region holds
// 2 slots per rank. The runs: docs/perf/shm-collectives.md, "Slot size".

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}


int64_t total(const std::vector<int64_t>& counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}

void prefix(const std::vector<int64_t>& counts, std::vector<int64_t>* displs) {
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    (*displs)[i] = at;
    at += counts[i];
  }
}

Status mismatch(std::string message) { return Status(Code::kMismatch, std::move(message)); }

std::string list(const int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Status check_counts(const std::string& what, const char* field,
                    const std::vector<int64_t>& counts, int n) {
  bool ok = counts.size() == static_cast<size_t>(n);
  for (int64_t c : counts) ok = ok && c >= 0;
  if (ok) return Status::OK();
  return invalid_argument(what + ": " + field + " needs one count >= 0 for each of " +
                          std::to_string(n) + " local ranks, got " +
                          std::to_string(counts.size()));
}

}  // namespace


size_t ShmCollectives::slot_size(size_t slot_bytes, int local_size) {
  return std::max(slot_bytes / kCacheLine * kCacheLine,
                  kCacheLine * static_cast<size_t>(std::max(1, local_size - 1)));
}

namespace {
size_t header_size(int local_size) {
  return (sizeof(int64_t) * (kFields + 2 * static_cast<size_t>(local_size)) + kCacheLine - 1) /
         kCacheLine * kCacheLine;
}
}  // namespace

size_t ShmCollectives::region_bytes(size_t slot_bytes, int local_size) {
  return kControlBytes + 2 * (header_size(local_size) + slot_size(slot_bytes, local_size));
}

Status ShmCollectives::create(std::shared_ptr<Node> node, transport::Liveness* alive,
                              const Options& options, std::unique_ptr<ShmCollectives>* out) {
  KOLO_RETURN_IF_ERROR(node->claim(Node::Region::kCollectives, "the shm collectives"));
  out->reset(new ShmCollectives(std::move(node), alive, options));
  return Status::OK();
}

ShmCollectives::ShmCollectives(std::shared_ptr<Node> node, transport::Liveness* alive,
                               const Options& options)
    : node_(std::move(node)),
      options_(options),
      slot_bytes_(slot_size(node_->options().collectives_slot_bytes, node_->local_size())),
      header_bytes_(header_size(node_->local_size())),
      pid_(static_cast<int64_t>(getpid())),  // once, not a system call per call
      alive_(alive),
      scratch_(std::max(slot_bytes_, kPieceBytes), 0) {  // pre-faulted
  for (int r = 0; r < local_size(); ++r) bases_.push_back(node_->at(r, node_->layout().collectives));
  displs_in_.resize(static_cast<size_t>(local_size()));
  displs_out_.resize(static_cast<size_t>(local_size()));
}

uint64_t* ShmCollectives::counter(int rank, int which) const {
  return reinterpret_cast<uint64_t*>(bases_[static_cast<size_t>(rank)] + which * kCacheLine);
}

int64_t* ShmCollectives::header(int rank, uint64_t round) const {
  return reinterpret_cast<int64_t*>(bases_[static_cast<size_t>(rank)] + kControlBytes +
                                    (round % 2) * (header_bytes_ + slot_bytes_));
}

char* ShmCollectives::slot(int rank, uint64_t round) const {
  return reinterpret_cast<char*>(header(rank, round)) + header_bytes_;
}

Status ShmCollectives::wait_peers(int which, uint64_t target, int only) {
  for (int p = 0; p < local_size(); ++p) {
    if (p == local_rank() || (only >= 0 && p != only)) continue;
    Status s = wait_for_counter(counter(p, which), target, kSpinLoads, alive_);
    if (!s.ok()) {
      return Status(s.code(), "shm collective: waiting for local rank " + std::to_string(p) +
                                  " (round " + std::to_string(target) + "): " + s.message());
    }
  }
  return Status::OK();
}

Status ShmCollectives::supports(Collective op, const CollectiveView& view) const {
  const std::string what = std::string("shm ") + collective_name(op);
  if (view.device.kind != DeviceKind::kCpu)
    return unsupported(what + ": CPU memory only, not " + device_name(view.device));
  if (!is_valid(view.dtype)) return unsupported(what + ": invalid dtype " + dtype_name(view.dtype));
  const int n = local_size();
  switch (op) {
    case Collective::kBroadcast:
      if (view.root < 0 || view.root >= n || view.count < 0) {
        return invalid_argument(what + ": root " + std::to_string(view.root) + " count " +
                                std::to_string(view.count) + " on a node of " +
                                std::to_string(n) + " ranks");
      }
      return Status::OK();
    case Collective::kAllgather:
      return check_counts(what, "recv_counts", view.recv_counts, n);
    case Collective::kAlltoall:
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts(what, "send_counts", view.send_counts, n));
      return check_counts(what, "recv_counts", view.recv_counts, n);
    case Collective::kReducescatter:
      if (!is_elementwise(view.reduction.op)) {
        return unsupported(what + ": sum, min, max or product, not " +
                           op_name(view.reduction.op));
      }
      return check_counts(what, "recv_counts", view.recv_counts, n);
    default:
      return internal_error(what + ": not a transport collective");
  }
}

Status ShmCollectives::run(Collective op, const CollectiveView& view) {
  KOLO_RETURN_IF_ERROR_AS_IS(supports(op, view));
  KOLO_RETURN_IF_ERROR(broken_);
  Call c;
  c.op = op;
  c.view = &view;
  c.elem = dtype_size(view.dtype);
  c.n = local_size();
  c.me = local_rank();
  c.out = static_cast<char*>(view.output);
  c.in = static_cast<const char*>(view.input);
  c.displs_in = &displs_in_;
  c.displs_out = &displs_out_;
  // Bytes each side spans, and the input blocks' displacements.
  size_t in_bytes = 0, out_bytes = 0;
  bool exactly_in_place = false;
  switch (op) {
    case Collective::kAllgather:
      prefix(view.recv_counts, &displs_out_);
      in_bytes = c.bytes(view.recv_counts[c.me]);
      out_bytes = c.bytes(total(view.recv_counts));
      // Exactly in place (the input is this rank's block of the output) is fine.
      exactly_in_place = c.in == c.out + c.bytes(displs_out_[c.me]);
      break;
    case Collective::kBroadcast:
      break;  // the root copies its input first (memmove); others read no input
    case Collective::kAlltoall:
      prefix(view.send_counts, &displs_in_);
      prefix(view.recv_counts, &displs_out_);
      in_bytes = c.bytes(total(view.send_counts));
      out_bytes = c.bytes(total(view.recv_counts));
      break;
    case Collective::kReducescatter:
      prefix(view.recv_counts, &displs_in_);
      in_bytes = c.bytes(total(view.recv_counts));
      out_bytes = c.bytes(view.recv_counts[c.me]);
      break;
    default:
      KOLO_UNREACHABLE("shm: not a transport collective (supports() turns it away)");
  }
  // An input that overlaps the output (reducescatter in place) is read from a
  // copy: the output's pieces are written while later input pieces are unread.
  if (!exactly_in_place && overlaps(c.in, in_bytes, c.out, out_bytes)) {
    if (staging_.size() < in_bytes) staging_.resize(in_bytes);
    std::memcpy(staging_.data(), c.in, in_bytes);
    c.in = staging_.data();
  }
  c.in_bytes = in_bytes;
  c.out_bytes = out_bytes;
  c.bcast_src = c.out;
  if (op == Collective::kBroadcast && c.me == view.root && view.input != view.output &&
      view.count > 0) {
    if (overlaps(view.input, c.bytes(view.count), c.out, c.bytes(view.count)) || c.n == 1)
      std::memmove(c.out, view.input, c.bytes(view.count));
    else
      c.bcast_src = c.in;  // copied to the output as it is posted
  }
  // Note [Streaming the output]
  if (op == Collective::kBroadcast) {
    c.stream = c.bytes(view.count) >= options_.broadcast_stream_output_min_bytes;
  } else {
    const size_t stream_from = view.callers_output ? options_.callers_stream_output_min_bytes
                                                   : options_.stream_output_min_bytes;
    c.stream = op != Collective::kReducescatter && out_bytes >= stream_from;
  }
  streamed_last_output_ = c.stream;
  // The first round's slot, written before the headers are read: by this rank's
  // own size and the last verdict (Note [Streaming slots across distant cores]).
  // (The node's verdict may be newer than this engine's last call: Note [One
  // calibration for the node] in core_distance.h.)
  if (options_.slot_stores == SlotStores::kAuto) far_ = node_->core_distance().last();
  const size_t posts =
      op == Collective::kBroadcast ? c.bytes(view.count) : exactly_in_place ? 0 : in_bytes;
  c.stream_slot = posts >= options_.stream_slot_min_bytes && far_;
  c.one_pass = one_pass(c, out_bytes);
  if (c.n == 1) {
    run_alone(c);
    return Status::OK();
  }
  Status status = run_call(c);
  if (!status.ok() && status.code() != Code::kMismatch)
    broken_ = status.with_context("shm collectives are unusable after an earlier failure");
  return status;
}

// One rank: the output from the input, the reduction's factors applied.
void ShmCollectives::run_alone(const Call& c) {
  const CollectiveView& v = *c.view;
  switch (c.op) {
    case Collective::kAllgather:
    case Collective::kAlltoall:
      if (c.in != c.out && v.recv_counts[0] > 0) std::memmove(c.out, c.in, c.bytes(v.recv_counts[0]));
      return;
    case Collective::kBroadcast:
      return;  // the root's memmove was all
    case Collective::kReducescatter:
      if (v.recv_counts[0] == 0) return;
      reduce::copy_scaled(c.out, c.in, v.recv_counts[0], v.dtype, v.reduction.prescale);
      transport::finish_output(v.reduction, c.out, v.recv_counts[0], v.dtype);
      return;
    default:
      KOLO_UNREACHABLE("shm: not a transport collective (supports() turns it away)");
  }
}

// Where [p, p + bytes) lies in kolo memory, as four header words from `at` on
// (fd, epoch, bytes, offset); fd -1 when it does not, kNoSource when bytes is 0.
void ShmCollectives::publish_span(const void* p, size_t bytes, int64_t* at) {
  SharedSpan span;
  const bool shared = bytes > 0 && find_shared(p, bytes, &span);
  at[0] = shared ? span.fd : bytes == 0 ? kNoSource : -1;
  at[1] = shared ? static_cast<int64_t>(span.epoch) : 0;
  at[2] = shared ? static_cast<int64_t>(span.bytes) : 0;
  at[3] = shared ? static_cast<int64_t>(span.offset) : 0;
}

void ShmCollectives::write_header(const Call& c, int64_t* h) const {
  const CollectiveView& v = *c.view;
  const bool bcast = c.op == Collective::kBroadcast;
  const bool reduces = c.op == Collective::kReducescatter;
  h[kOp] = static_cast<int64_t>(c.op);
  h[kDtype] = static_cast<int64_t>(v.dtype);
  h[kRoot] = bcast ? v.root : 0;
  // Alltoall: the node's total, which decides the call's one pass (every rank
  // must agree on it before it moves data that way).
  h[kCount] = bcast ? v.count : c.op == Collective::kAlltoall ? v.alltoall_total : 0;
  h[kReduceOp] = reduces ? static_cast<int64_t>(v.reduction.op) : 0;
  h[kPid] = pid_;
  // Note [The peers' sources in kolo memory]: a broadcast's peers read the
  // root's count elements; the other collectives read from the input.
  const char* source = bcast ? c.bcast_src : c.in;
  h[kAddress] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(source));
  const bool root = bcast && c.me == v.root;
  publish_span(source, bcast ? (root ? c.bytes(v.count) : 0) : c.in_bytes, h + kFd);
  // The outputs that peers may write: a broadcast receiver's (Note [The root
  // writes a share]), an allgather rank's (Note [An allgather pushes its block]).
  const size_t writable = bcast && !root                      ? c.bytes(v.count)
                          : c.op == Collective::kAllgather ? c.out_bytes
                                                           : 0;
  publish_span(c.out, writable, h + kOutFd);
  for (int i = 0; i < c.n; ++i) {
    h[kFields + i] = c.op == Collective::kAlltoall ? v.send_counts[i]
                     : bcast                         ? 0
                                                     : v.recv_counts[i];
    h[kFields + c.n + i] = c.op == Collective::kAlltoall ? v.recv_counts[i] : 0;
  }
  // A broadcast root's second row (unused otherwise): its own word says whether
  // it writes a share into the receivers' outputs; receiver d's word, set later,
  // whether it wrote d's (Note [The root writes a share]).
  if (bcast && c.me == v.root) h[kFields + c.n + c.me] = c.bcast_src == c.out;
}

// Every rank reads every header, so every rank finds the same first difference.
Status ShmCollectives::check_headers(const Call& c) const {
  const std::string what = std::string("shm ") + collective_name(c.op) + ": local ranks disagree";
  const int64_t* zero = header(0, c.first);
  for (int r = 1; r < c.n; ++r) {
    const int64_t* h = header(r, c.first);
    for (int f = kOp; f <= kReduceOp; ++f) {
      if (h[f] == zero[f]) continue;
      const bool total = f == kCount && c.op == Collective::kAlltoall;
      return mismatch(what + " on the " + (total ? "alltoall_total" : kFieldNames[f]) +
                      ": rank 0 has " + std::to_string(zero[f]) + ", rank " + std::to_string(r) +
                      " has " + std::to_string(h[f]));
    }
    if (c.op == Collective::kAlltoall) continue;
    if (!std::equal(h + kFields, h + kFields + c.n, zero + kFields)) {
      return mismatch(what + " on recv_counts: rank 0 has " + list(zero + kFields, c.n) +
                              ", rank " + std::to_string(r) + " has " + list(h + kFields, c.n));
    }
  }
  if (c.op != Collective::kAlltoall) return Status::OK();
  for (int s = 0; s < c.n; ++s) {
    for (int d = 0; d < c.n; ++d) {
      const int64_t sent = header(s, c.first)[kFields + d];
      const int64_t expected = header(d, c.first)[kFields + c.n + s];
      if (sent == expected) continue;
      return mismatch(what + ": rank " + std::to_string(s) + " sends " +
                              std::to_string(sent) + " elements to rank " + std::to_string(d) +
                              ", which expects " + std::to_string(expected));
    }
  }
  return Status::OK();
}

// Note [One pass over the own block]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An allgather rank's own block, and a broadcast root's input when it is not its
// output, go to two places: the slot (for the peers) and the rank's output.
// Copied to each separately the block is read from memory twice; post_own()
// walks it in L1-sized pieces instead, each copied into the slot and from there
// (in L1) into the output. Bytes a rank moves to or from memory per byte of a
// 2-rank allgather's output (slot traffic, which stays in cache, aside): input
// read 1 -> 0.5, output written 1 (plus 1 read for ownership, unless streamed:
// Note [Streaming the output]). Alltoall's own block goes from input to output
// once, and reducescatter reads each input byte once, already.
void ShmCollectives::post_own(const Call& c, char* slot, const char* src, char* out,
                              size_t bytes) const {
  for (size_t at = 0; at < bytes; at += kPieceBytes) {
    const size_t m = std::min(kPieceBytes, bytes - at);
    copy(slot + at, src + at, m, c.stream_slot);
    if (out != src) copy(out + at, src + at, m, c.stream);  // src's piece is in L1
  }
}

// Note [Streaming the output]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A plain store first reads the line it writes (read for ownership); an output
// too large to stay in cache is then read from memory and written back, where a
// streaming store only writes it. So allgathers and alltoalls whose output has
// kStreamOutputMinBytes (4 MiB) or more, and broadcasts of
// kBroadcastStreamOutputMinBytes (16 MiB) or more, write it with streaming
// stores, and fence before run() returns. The thresholds are set through kolo,
// not by the engine's own bench: between kolo's calls the caller fills its input
// and reads its output, which moves where streaming starts to pay
// (docs/perf/shm-collectives.md, "Streaming the output"). Reducescatter's output
// is written by the reduction and is not streamed.
// An allgather into the caller's buffer (CollectiveView::callers_output)
// streams only from kCallersStreamOutputMinBytes (32 MiB): that buffer is kept
// and reused, may lie dirty in this core's cache (where a streaming store
// evicts a line first), and is read next by the caller. At 4 MiB, the buffer
// written before each call, 633-669 us streamed against 399-418 plain. Outputs
// that come cold still want streaming (sixteen broadcasts of 16 MiB a step,
// the ResNet-50 step's allreduces), so the others keep their thresholds
// (docs/perf/kolo-memory.md, "2026-11-29: outputs the caller hands in").

// Step 1 of round k of the call: this rank's part into its slot.
void ShmCollectives::post(const Call& c, int64_t k) {
  const CollectiveView& v = *c.view;
  char* mine = slot(c.me, c.first + static_cast<uint64_t>(k));
  const int64_t lo = c.lo(k);
  switch (c.op) {
    case Collective::kAllgather:
      post_own(c, mine, c.in + c.bytes(lo), c.out + c.bytes((*c.displs_out)[c.me] + lo),
               c.bytes(c.len(v.recv_counts[c.me], k)));
      return;
    case Collective::kBroadcast:
      if (c.me == v.root)
        post_own(c, mine, c.bcast_src + c.bytes(lo), c.out + c.bytes(lo), c.bytes(c.len(v.count, k)));
      return;
    case Collective::kAlltoall:
    case Collective::kReducescatter: {
      const std::vector<int64_t>& counts =
          c.op == Collective::kAlltoall ? v.send_counts : v.recv_counts;
      for (int d = 0; d < c.n; ++d) {
        const int64_t m = c.len(counts[d], k);
        if (d == c.me || m == 0) continue;
        put(mine + c.region(c.me, d), c.in + c.bytes((*c.displs_in)[d] + lo), m, v.dtype,
                 c.op == Collective::kReducescatter ? v.reduction.prescale : 1.0, c.stream_slot,
                 scratch_.data());
      }
      return;
    }
    default:
      KOLO_UNREACHABLE("shm: not a transport collective (supports() turns it away)");
  }
}

// Note [The own block while the peers catch up]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An alltoall rank's own block goes from its input to its output and needs
// nobody. Copied in consume() it would wait for the slowest peer's post first;
// copied right after this rank's own post it fills that wait, since the ranks
// rarely arrive together (docs/perf/shm-collectives.md, "The own block").
// In the call's first round the headers are not read yet; a rank whose own
// send and receive counts differ (a mismatch the headers report) copies nothing:
// its input may hold fewer elements than its output's own block.
void ShmCollectives::copy_own(const Call& c, int64_t k) const {
  const CollectiveView& v = *c.view;
  if (c.op != Collective::kAlltoall || v.send_counts[c.me] != v.recv_counts[c.me]) return;
  const int64_t m = c.len(v.recv_counts[c.me], k);
  const char* src = c.in + c.bytes((*c.displs_in)[c.me] + c.lo(k));
  char* dst = c.out + c.bytes((*c.displs_out)[c.me] + c.lo(k));
  if (m > 0 && src != dst) copy(dst, src, c.bytes(m), c.stream);
}

// Step 2 of round k of the call: the peers' parts into the output.
void ShmCollectives::consume(const Call& c, int64_t k) {
  const CollectiveView& v = *c.view;
  const uint64_t g = c.first + static_cast<uint64_t>(k);
  const int64_t lo = c.lo(k);
  if (c.op == Collective::kBroadcast) {
    const size_t m = c.bytes(c.len(v.count, k));
    if (c.me != v.root && m > 0) copy(c.out + c.bytes(lo), slot(v.root, g), m, c.stream);
    return;
  }
  if (c.op == Collective::kReducescatter) {
    const int64_t m = c.len(v.recv_counts[c.me], k);
    if (m == 0) return;
    char* dst = c.out + c.bytes(lo);
    const char* a = c.in + c.bytes((*c.displs_in)[c.me] + lo);
    if (v.reduction.scales_input()) {
      reduce::copy_scaled(dst, a, m, v.dtype, v.reduction.prescale);
      a = dst;
    }
    for (int p = 0; p < c.n; ++p) {
      if (p == c.me) continue;
      reduce::reduce(dst, a, slot(p, g) + c.region(p, c.me), m, v.dtype, v.reduction.op);
      a = dst;
    }
    transport::finish_output(v.reduction, dst, m, v.dtype);
    return;
  }
  // Allgather, alltoall: from each peer p, its piece for this rank (the own
  // piece went to the output in post() or copy_own()).
  for (int p = 0; p < c.n; ++p) {
    const int64_t m = c.len(v.recv_counts[p], k);
    if (m == 0 || p == c.me) continue;
    const char* src = slot(p, g) + (c.op == Collective::kAlltoall ? c.region(p, c.me) : 0);
    copy(c.out + c.bytes((*c.displs_out)[p] + lo), src, c.bytes(m), c.stream);
  }
}

Status ShmCollectives::run_call(Call& c) {
  const CollectiveView& v = *c.view;
  const uint64_t g0 = next_round_;
  const bool split = c.op == Collective::kAlltoall || c.op == Collective::kReducescatter;
  c.first = g0;
  c.region_bytes = split ? slot_bytes_ / static_cast<size_t>(c.n - 1) / kCacheLine * kCacheLine
                         : slot_bytes_;
  c.piece = static_cast<int64_t>(c.region_bytes / c.elem);
  if (c.op == Collective::kBroadcast) c.piece = broadcast_piece(c);
  // The first round: the header and the first pieces.
  if (g0 >= 1) KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kDone, g0 - 1));
  write_header(c, header(c.me, g0));
  c.header_only = !c.one_pass && posted_header_only(c, c.me, largest_in_view(c));
  if (!c.one_pass && !c.header_only) post(c, 0);
  if (c.stream_slot) _mm_sfence();
  publish_counter(counter(c.me, kPosted), g0 + 1);
  if (c.one_pass)
    copy_own_whole(c);
  else
    copy_own(c, 0);
  KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kPosted, g0 + 1));
  Status agreed = check_headers(c);
  if (!agreed.ok()) {
    publish_counter(counter(c.me, kDone), g0 + 1);
    next_round_ = g0 + 1;
    return agreed;
  }
  // Rounds: the largest piece of the call, from the headers (every rank alike).
  int64_t largest = c.op == Collective::kBroadcast ? v.count : 0;
  for (int r = 0; r < c.n && c.op != Collective::kBroadcast; ++r) {
    for (int i = 0; i < c.n; ++i) largest = std::max(largest, header(r, g0)[kFields + i]);
  }
  const size_t largest_bytes = c.bytes(largest);
  bool mapped = largest_bytes >= direct_min_bytes(c.op) && sources_shared(c);
  for (int r = 0; r < c.n && !mapped; ++r) mapped = posted_header_only(c, r, largest);
  c.push = c.op == Collective::kAllgather && single_copy() &&
           largest_bytes >= options_.allgather_push_min_bytes;
  if (c.one_pass ||
      (single_copy() && (largest_bytes >= options_.single_copy_min_bytes || mapped))) {
    // Note [Single copy for large calls]: done only once every peer is done
    // reading this rank's buffer, which the caller may change once run() returns.
    map_sources(c);
    Status copied = copy_direct(c);
    if (c.stream) _mm_sfence();  // round 0's own piece may have been streamed
    failpoint("shm-direct");
    publish_counter(counter(c.me, kDone), g0 + 1);
    next_round_ = g0 + 1;
    KOLO_RETURN_IF_ERROR_AS_IS(copied);
    KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kDone, g0 + 1));
    return checked_pushes(c);
  }
  KOLO_RETURN_IF_ERROR_AS_IS(decide_slot_stores(c, static_cast<int64_t>(c.bytes(largest))));
  c.rounds = std::max<int64_t>(1, (largest + c.piece - 1) / c.piece);
  const int reads_from = c.op == Collective::kBroadcast ? v.root : -1;
  for (int64_t k = 0; k < c.rounds; ++k) {
    const uint64_t g = g0 + static_cast<uint64_t>(k);
    if (k + 1 < c.rounds) {  // Step 1 of the next round first (see the top of the file).
      KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kDone, g));
      post(c, k + 1);
      if (c.stream_slot) _mm_sfence();  // streamed stores are not ordered by the release
      publish_counter(counter(c.me, kPosted), g + 2);
      copy_own(c, k + 1);
    }
    if (k > 0) KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kPosted, g + 1, reads_from));
    consume(c, k);
    publish_counter(counter(c.me, kDone), g + 1);
  }
  next_round_ = g0 + static_cast<uint64_t>(c.rounds);
  if (c.stream) _mm_sfence();  // the caller's loads after run() see the streamed output
  return Status::OK();
}

}  // namespace kolo::shm
