#include "transports/socket/socket_control_plane.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/failpoint.h"

namespace kolo::socket {
namespace {

using transport::Bytes;

std::string words_to_bytes(const std::vector<uint64_t>& words) {
  std::string out(words.size() * sizeof(uint64_t), '\0');
  if (!words.empty()) std::memcpy(out.data(), words.data(), out.size());
  return out;
}

// ANDs `bytes` (a peer's vector) into `bits`; a length that differs is an error
// (the contract says every rank passes the same length).
Status and_into(const std::string& bytes, int from, std::vector<uint64_t>* bits) {
  if (bytes.size() != bits->size() * sizeof(uint64_t))
    return invalid_argument("bitwise_and: rank " + std::to_string(from) + " passed " +
                            std::to_string(bytes.size() / sizeof(uint64_t)) + " words, this rank " +
                            std::to_string(bits->size()));
  for (size_t i = 0; i < bits->size(); ++i) {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + i * sizeof w, sizeof w);
    (*bits)[i] &= w;
  }
  return Status::OK();
}

// Blobs in one buffer: a count, then each length and its bytes.
std::string pack(const std::vector<Bytes>& blobs) {
  std::string out;
  auto put = [&out](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(blobs.size());
  for (const Bytes& b : blobs) {
    put(b.size());
    out += b;
  }
  return out;
}

Status unpack(const std::string& buffer, size_t expect, std::vector<Bytes>* blobs) {
  size_t pos = 0;
  auto take = [&](uint64_t* v) {
    if (buffer.size() - pos < sizeof *v) return false;
    std::memcpy(v, buffer.data() + pos, sizeof *v);
    pos += sizeof *v;
    return true;
  };
  uint64_t n = 0;
  if (!take(&n) || n != expect) return internal_error("allgather: a packed buffer of another world");
  blobs->clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t length = 0;
    if (!take(&length) || buffer.size() - pos < length)
      return internal_error("allgather: a truncated packed buffer");
    blobs->push_back(buffer.substr(pos, length));
    pos += length;
  }
  return Status::OK();
}

}  // namespace

SocketControlPlane::SocketControlPlane(std::shared_ptr<Engine> engine, uint32_t channel,
                                       std::vector<int> members,
                                       const transport::Topology& topology, NodeServices node)
    : engine_(std::move(engine)), channel_(channel), members_(std::move(members)),
      topology_(topology) {
  use_node(std::move(node));
}

void SocketControlPlane::use_node(NodeServices node) {
  node_ = std::move(node);
  remote_.clear();
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
    const bool on_host = node_.doorbell && i < static_cast<int>(node_.on_host.size()) &&
                         node_.on_host[i];
    if (i != topology_.rank && !on_host) remote_.push_back(members_[i]);
  }
  // See Note [One sleep for both doorbells].
  if (node_.doorbell) engine_->set_waker(channel_, [bell = node_.doorbell.get()] { bell->wake(); });
}

SocketControlPlane::~SocketControlPlane() { engine_->close_channel(channel_); }

Status SocketControlPlane::send(int member, int round, std::string blob) {
  return engine_->send_control(members_[member], channel_, key(round), std::move(blob));
}

Status SocketControlPlane::recv(int member, int round, std::string* blob) {
  return engine_->recv_control(members_[member], channel_, key(round), blob);
}

Status SocketControlPlane::check_root(const char* what, int root) const {
  if (root >= 0 && root < topology_.size) return Status::OK();
  return invalid_argument(std::string(what) + " root " + std::to_string(root) + " outside 0.." +
                          std::to_string(topology_.size - 1));
}

Status SocketControlPlane::gather(const Bytes& mine, std::vector<Bytes>* all, int root) {
  KOLO_RETURN_IF_ERROR(check_root("gather", root));
  ++seq_;
  all->clear();
  if (topology_.rank != root) return send(root, 0, mine);
  all->resize(static_cast<size_t>(topology_.size));
  for (int r = 0; r < topology_.size; ++r) {
    if (r == root) {
      (*all)[r] = mine;
    } else {
      KOLO_RETURN_IF_ERROR_AS_IS(recv(r, 0, &(*all)[r]));
    }
  }
  return Status::OK();
}

// A binomial tree: relative rank v gets the blob from v minus its lowest set
// bit, then passes it to v + 2^k for every 2^k below that bit.
Status SocketControlPlane::broadcast(Bytes* blob, int root) {
  KOLO_RETURN_IF_ERROR(check_root("broadcast", root));
  ++seq_;
  const int n = topology_.size;
  const int v = (topology_.rank - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      KOLO_RETURN_IF_ERROR_AS_IS(recv((v - mask + root) % n, 0, blob));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) KOLO_RETURN_IF_ERROR_AS_IS(send((v + mask + root) % n, 0, *blob));
  }
  return Status::OK();
}

Status SocketControlPlane::allgather(const Bytes& mine, std::vector<Bytes>* all) {
  std::vector<Bytes> gathered;
  KOLO_RETURN_IF_ERROR_AS_IS(gather(mine, &gathered, 0));
  Bytes packed = topology_.rank == 0 ? pack(gathered) : Bytes();
  KOLO_RETURN_IF_ERROR_AS_IS(broadcast(&packed, 0));
  return unpack(packed, static_cast<size_t>(topology_.size), all);
}

Status SocketControlPlane::bitwise_and(std::vector<uint64_t>* bits) {
  failpoint("negotiate");
  and_on_node_ = and_fits_node(*bits);
  if (and_on_node_) return node_.node_and->run(bits);
  return and_rounds(bits);
}

bool SocketControlPlane::and_fits_node(const std::vector<uint64_t>& bits) const {
  return node_.node_and && static_cast<int>(node_.on_host.size()) == topology_.size &&
         std::all_of(node_.on_host.begin(), node_.on_host.end(), [](bool b) { return b; }) &&
         bits.size() <= node_.node_and->max_words();
}

Status SocketControlPlane::ring_and(uint64_t cycle, std::vector<uint64_t>* bits) {
  if (!node_.doorbell || !remote_.empty() || !and_fits_node(*bits))
    return ControlPlane::ring_and(cycle, bits);
  failpoint("negotiate");
  and_on_node_ = true;
  return node_.node_and->run_ringing_late(bits, node_.doorbell.get(), cycle);
}

// Recursive doubling. With p the largest power of two <= n, ranks p..n-1 first
// hand their vector to rank - p and get the answer back at the end.
Status SocketControlPlane::and_rounds(std::vector<uint64_t>* bits) {
  ++seq_;
  const int n = topology_.size;
  const int me = topology_.rank;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int round_out = 63;  // the extra ranks' answer
  if (me >= p) {
    KOLO_RETURN_IF_ERROR_AS_IS(send(me - p, 0, words_to_bytes(*bits)));
    std::string answer;
    KOLO_RETURN_IF_ERROR_AS_IS(recv(me - p, round_out, &answer));
    std::fill(bits->begin(), bits->end(), ~uint64_t{0});
    return and_into(answer, members_[me - p], bits);
  }
  std::string in;
  if (me + p < n) {
    KOLO_RETURN_IF_ERROR_AS_IS(recv(me + p, 0, &in));
    KOLO_RETURN_IF_ERROR_AS_IS(and_into(in, members_[me + p], bits));
  }
  int round = 1;
  for (int mask = 1; mask < p; mask <<= 1, ++round) {
    const int partner = me ^ mask;
    KOLO_RETURN_IF_ERROR_AS_IS(send(partner, round, words_to_bytes(*bits)));
    KOLO_RETURN_IF_ERROR_AS_IS(recv(partner, round, &in));
    KOLO_RETURN_IF_ERROR_AS_IS(and_into(in, members_[partner], bits));
  }
  if (me + p < n) KOLO_RETURN_IF_ERROR_AS_IS(send(me + p, round_out, words_to_bytes(*bits)));
  return Status::OK();
}

size_t SocketControlPlane::carry_capacity(size_t words, bool in_line) const {
  return node_.node_and && words <= node_.node_and->max_words()
             ? node_.node_and->carry_bytes(words, in_line)
             : 0;
}

char* SocketControlPlane::carry_slot(size_t words, bool in_line) {
  return node_.node_and ? node_.node_and->carry_slot(words, in_line) : nullptr;
}

bool SocketControlPlane::unanimous() const { return and_on_node_ && node_.node_and->unanimous(); }

const char* SocketControlPlane::carried(int rank) const {
  return node_.node_and ? node_.node_and->carried(rank) : nullptr;
}

Status SocketControlPlane::barrier() {
  std::vector<uint64_t> nothing;
  return and_rounds(&nothing);
}

Status SocketControlPlane::ring(uint64_t cycle) {
  if (node_.doorbell) node_.doorbell->ring(cycle);
  return engine_->ring(channel_, cycle, remote_);
}

bool SocketControlPlane::rung(uint64_t cycle) {
  if (node_.doorbell && node_.doorbell->rung(cycle)) return true;
  return engine_->rung(channel_, cycle);
}

void SocketControlPlane::wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                                       std::chrono::microseconds /*poll*/) {
  if (!node_.doorbell) {
    engine_->wait_for_ring(channel_, cycle, timeout);
    return;
  }
  // See Note [One sleep for both doorbells]: the engine wakes the futex.
  const std::chrono::milliseconds every = liveness()->check_every();
  if (every < std::chrono::hours(1)) timeout = std::min<std::chrono::microseconds>(timeout, every);
  node_.doorbell->wait(cycle, timeout, [&] { return engine_->rung(channel_, cycle); });
}

void SocketControlPlane::wake() {
  if (node_.doorbell) node_.doorbell->wake();
  engine_->wake(channel_);
}

}  // namespace kolo::socket
