// NodeAnd: the negotiation's bitwise AND among the ranks of one node, through the
// node's shared segment (node.h) instead of the world's collective. Used by a
// world's control plane when every rank of the world is on this node (Note [The
// AND on one node]).
//
// Layout (the node AND's region of each local rank's part): two slots, each a
// sequence word, the word counting readers asleep on it (counter.h), then up to
// kMaxWords words, then kCarryBytes that a call may carry beside its vector (Note
// [Data rides with the AND]), from the start of a cache line: a short vector (four words
// for the first 64 cached tensors, Note [An AND as long as the cache in use] in
// core/negotiator.h) shares its sequence's line, so a peer reads one line per
// call. Call k (counted identically on every rank) writes this rank's words into
// slot k % 2, publishes that slot's sequence = k + 1 with a release store, waits
// (acquire loads) until every peer's slot k % 2 has sequence >= k + 1 and ANDs
// their words into the result. Two slots suffice: a peer writes slot k % 2 again
// only in call k + 2, which it starts after call k + 1 finished, which needed
// this rank's sequence k + 2, published after it had read call k.
//
// Contract: create() is local (the region was zeroed by Node::create); run() is
// called by one thread per rank (the coordinator), in the same order on every
// rank, with vectors of the same length on every rank, at most kMaxWords long.
// Waiting spins briefly, then yields and sleeps (counter.h), consulting
// the Liveness given to create(). A failed peer fails the call; the AND is then
// unusable.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/liveness.h"
#include "transports/shm/node.h"

namespace kolo::shm {

class NodeAnd {
 public:
  // 4 KiB: the negotiation's vector is 1 + 3 * ceil(cache capacity / 64) words,
  // 49 at the default capacity of 1024; up to 10880 entries fit.
  static constexpr size_t kMaxWords = 512;
  // Over `node`'s AND region; `alive` (may be null) outlives the AND. An error
  // when the segment has no such region or another AND uses it.
  static Status create(std::shared_ptr<Node> node, transport::Liveness* alive,
                       std::unique_ptr<NodeAnd>* out);

  // Elementwise AND of `bits` over the node's ranks, in place. `late` (may be
  // null) is called once, with `context`, if a peer has not posted its vector
  // shortly after this rank did: it rings the peers for the cycle (Note
  // [Ringing only the late]).
  using Late = void (*)(void* context);
  Status run(std::vector<uint64_t>* bits, Late late = nullptr, void* context = nullptr);
  // A Late over a doorbell (anything with ring(c) and rung(c)) for cycle
  // `cycle`: rings unless a peer has rung this rank for it.
  template <typename Bell>
  struct RingLate {
    Bell* bell;
    uint64_t cycle;
    static void ring(void* self) {
      auto* r = static_cast<RingLate*>(self);
      if (!r->bell->rung(r->cycle)) r->bell->ring(r->cycle);
    }
  };

  // Note [Data rides with the AND] (core/negotiator.h): each slot carries
  // kCarryBytes from the cache line after its vector, or the few bytes left in
  // the vector's own line (`in_line`: Note [The carry shares the vector's
  // line]). carry_slot(words, in_line) is where this rank may write what its
  // next run() (of a vector of `words` words) carries, carry_capacity(words,
  // in_line) bytes; after a run(), unanimous() says whether every rank passed a
  // vector equal to this rank's, and carried(r) is what local rank r wrote
  // before that run(), at the kind of slot this rank last asked for: readable
  // until this rank's next run() (a peer rewrites that slot only in the run
  // after next, which needs this rank's next).
  static constexpr size_t kCarryBytes = size_t{16} << 10;
  // A slot: its sequence word and the word counting readers asleep on it (the
  // counter layout of counter.h), then the vector, then the carried bytes;
  // room for kCarryBytes after the longest vector.
  static constexpr size_t kHeaderWords = 2;
  static constexpr size_t kLineBytes = 64;
  static constexpr size_t carry_offset(size_t words, bool in_line) {
    const size_t end = (kHeaderWords + words) * sizeof(uint64_t);
    return in_line ? end : (end + kLineBytes - 1) / kLineBytes * kLineBytes;
  }
  static constexpr size_t carry_capacity(size_t words, bool in_line) {
    if (words > kMaxWords) return 0;
    if (!in_line) return kCarryBytes;
    const size_t end = carry_offset(words, true);
    return end < kLineBytes ? kLineBytes - end : 0;
  }
  static const size_t kSlotBytes;  // (below) whole lines
  // The region in each rank's part: two slots.
  static const size_t kRegionBytes;
  char* carry_slot(size_t words, bool in_line);
  bool unanimous() const { return unanimous_; }
  const char* carried(int rank) const;

 private:
  NodeAnd(std::shared_ptr<Node> node, transport::Liveness* alive, int spin_loads)
      : node_(std::move(node)), alive_(alive), spin_loads_(spin_loads) {}
  uint64_t* sequence(int rank, uint64_t call) const;
  uint64_t* slot(int rank, uint64_t call) const;

  std::shared_ptr<Node> node_;
  transport::Liveness* alive_;
  int spin_loads_;      // before a peer's sequence is waited for (node_and.cc)
  uint64_t calls_ = 0;  // the same on every rank
  // Where carried() reads: the last run()'s slot (from its vector's length and
  // the kind of slot asked for before it), and the kind asked for since.
  size_t carried_at_ = 0;
  bool in_line_ = false;
  bool unanimous_ = false;  // the last run()'s vectors were equal on every rank
  Status broken_;
};

inline constexpr size_t NodeAnd::kSlotBytes =
    NodeAnd::carry_offset(NodeAnd::kMaxWords, false) + NodeAnd::kCarryBytes;
inline constexpr size_t NodeAnd::kRegionBytes = 2 * NodeAnd::kSlotBytes;

// Note [The AND on one node]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every negotiation cycle is one bitwise AND (the response cache's fast path). As
// an MPI_Iallreduce finished with MPI_Test it cost 2-4 us per cycle at 2 ranks on
// the 2-core VM (kolo's timeline, KOLO_TIMELINE, 8-byte allreduces), a third of a
// small allreduce. Through shared memory it is a store, a release and one cache
// line per peer. Worlds that span nodes keep their own collective: a shm AND
// inside the node plus one between nodes would need a third step (sharing the
// cross-node answer) and saves little where a network hop dominates.

// Note [The carry shares the vector's line]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The carried bytes start right after the vector (16-byte aligned), not on a
// line of their own after the longest vector: with the usual short vector
// (four words) the sequence, the vector and the first 16 carried bytes share
// one cache line, so a peer that has waited on that line reads a small
// tensor's part with it, and a larger part begins on the next line instead of
// 4 KiB further on. The place depends on the vector's length, which every rank
// passes alike (the contract above; it is in the vector's first word, so
// unanimous() also says the carries were written at the same place). An 8-byte
// allreduce alone at 2 ranks: docs/perf/small-ops.md, "The carry shares the
// vector's line".

// Note [Ringing only the late]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank with news rang the doorbell before its AND, so that idle peers join
// the cycle: a compare-and-swap on each peer's doorbell line, which the peer
// then reads back, two cache-line transfers on the way to a call that is
// itself about two (the vector's line, the carried bytes). When the peers are
// already on their way, as in a loop of small blocking calls, the ring tells
// them nothing. On a node where every rank of the world shares the AND, the
// control plane therefore posts the vector first and rings only if some peer
// has not posted its own after kLateLoads looks (a few hundred nanoseconds)
// and nobody has rung this rank for the cycle; an idle peer is woken that much
// later. Ranks on other nodes are rung before, as always.
}  // namespace kolo::shm
