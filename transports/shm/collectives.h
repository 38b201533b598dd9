// ShmCollectives: allgather(v), broadcast, alltoall(v) and reducescatter inside
// one node, on its region of the node's segment (node.h); the "shm" transport's
// collectives other than allreduce (ShmTransport::collective) and the node step
// of the MPI world's hierarchical collectives.
//
// Contract (see transport/transport.h, CollectiveView): called by the coordinator
// thread only, for collectives in the same order on every rank of the node; CPU
// memory; every dtype; reducescatter with SUM, MIN, MAX, PRODUCT and the whole
// Reduction (prescale, postscale, integer division) applied here. The view's
// rank indices are local ranks (shm is offered when the world is one node). The
// algorithm is explained at the top of collectives.cc. Ranks synchronise through
// counters in the segment; no call to the world is made.
//
// Errors: supports() answers the same on every rank for the same view. Ranks
// whose views disagree (op, dtype, counts, root) all return the same
// Mismatch naming the field and two ranks' values, and the engine stays
// usable. A peer that has failed (the Liveness given to create() says so) fails
// the call; the engine is then broken and fails every later call. Waiting spins
// briefly, then yields, then sleeps (counter.h, wait_for_counter).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transport/liveness.h"
#include "transports/shm/node.h"
#include "transports/shm/shared_alloc.h"

namespace kolo::shm {

class ShmCollectives {
 public:
  // Bytes of one slot: what a rank publishes per round. See Note [Collective slot size].
  static constexpr size_t kDefaultSlotBytes = size_t{1} << 20;

  // Calls whose largest block has at least this many bytes copy straight from
  // the peers' buffers when single_copy() (Note [Single copy for large calls]).
  static constexpr size_t kSingleCopyMinBytes = SIZE_MAX;
  // Allgathers and alltoalls whose output (per rank, on average) has between
  // kOnePassMinBytes and kOnePassMaxBytes read the peers' blocks straight from
  // their inputs when single_copy(), with no slot round first (Note [One pass
  // from the peers' inputs]).
  static constexpr size_t kOnePassMinBytes = size_t{64} << 10;
  static constexpr size_t kOnePassMaxBytes = size_t{16} << 20;
  // Calls whose largest block has at least this many bytes (a broadcast:
  // kBroadcastDirectMinBytes), and whose every rank's data lies in kolo_alloc
  // memory, copy straight from the peers' buffers, mapped (Note [The peers'
  // sources in kolo memory] says why 8 and 16 KiB).
  static constexpr size_t kSharedDirectMinBytes = size_t{8} << 10;
  static constexpr size_t kBroadcastDirectMinBytes = size_t{16} << 10;
  // Allgathers whose largest block has at least this many bytes, on a node
  // that reads single copy, write each rank's block into the peers' outputs
  // where those lie in kolo_alloc memory (Note [An allgather pushes its block]).
  static constexpr size_t kAllgatherPushMinBytes = size_t{16} << 20;
  // Allgathers and alltoalls whose output has at least kStreamOutputMinBytes,
  // broadcasts of at least kBroadcastStreamOutputMinBytes and allgathers into
  // the caller's output (CollectiveView::callers_output) of at least
  // kCallersStreamOutputMinBytes write their output with streaming stores
  // (Note [Streaming the output]).
  static constexpr size_t kStreamOutputMinBytes = size_t{4} << 20;
  static constexpr size_t kBroadcastStreamOutputMinBytes = size_t{16} << 20;
  static constexpr size_t kCallersStreamOutputMinBytes = size_t{32} << 20;
  // How round pieces are written into the slots (Note [Streaming slots across
  // distant cores]): kAuto follows the node's measurement of the cores'
  // distance; tests and the bench force either way.
  enum class SlotStores { kAuto, kPlain, kStreaming };
  // Calls whose largest block has at least this many bytes may stream their
  // slots (Note [Streaming slots across distant cores] says why 2 KiB).
  static constexpr size_t kStreamSlotMinBytes = size_t{2} << 10;
  // Broadcasts of up to this many bytes, between cores that share a cache, run in
  // pieces of an eighth (at least 4 KiB) so that the receivers copy one while the
  // root writes the next (Note [Small broadcasts in pieces, near]).
  static constexpr size_t kBroadcastPiecesMaxBytes = size_t{64} << 10;
  // ... and so do broadcasts of at least this many bytes (Note [Large broadcasts
  // in pieces, near]).
  static constexpr size_t kBroadcastLargePiecesMinBytes = size_t{512} << 10;
  static constexpr size_t kBroadcastPieces = 8;
  static constexpr size_t kMinBroadcastPieceBytes = size_t{4} << 10;
  // Broadcasts of more than this many bytes, between cores far apart, run in
  // pieces of a quarter, at least kFarBroadcastPieceMinBytes and at most
  // kFarBroadcastPieceMaxBytes, so that the receivers read one while the root
  // streams the next (Note [Large broadcasts in pieces, far]).
  static constexpr size_t kFarBroadcastPiecesAboveBytes = size_t{128} << 10;
  static constexpr size_t kFarBroadcastPieceMinBytes = size_t{128} << 10;
  static constexpr size_t kFarBroadcastPieceMaxBytes = size_t{256} << 10;

  // The engine's measured choices, fixed at create() and the same on every rank
  // of the node. kolo uses the defaults; tests and the bench (shm_collectives_bench)
  // set others to reach each path: 0 (always) or SIZE_MAX (never) for a size.
  struct Options {
    size_t single_copy_min_bytes = kSingleCopyMinBytes;
    size_t one_pass_min_bytes = kOnePassMinBytes;
    size_t one_pass_max_bytes = kOnePassMaxBytes;
    size_t shared_direct_min_bytes = kSharedDirectMinBytes;
    size_t broadcast_direct_min_bytes = kBroadcastDirectMinBytes;
    size_t allgather_push_min_bytes = kAllgatherPushMinBytes;
    size_t stream_output_min_bytes = kStreamOutputMinBytes;
    size_t broadcast_stream_output_min_bytes = kBroadcastStreamOutputMinBytes;
    size_t callers_stream_output_min_bytes = kCallersStreamOutputMinBytes;
    SlotStores slot_stores = SlotStores::kAuto;
    size_t stream_slot_min_bytes = kStreamSlotMinBytes;
    size_t broadcast_pieces_max_bytes = kBroadcastPiecesMaxBytes;
    size_t broadcast_large_pieces_min_bytes = kBroadcastLargePiecesMinBytes;
    size_t far_broadcast_pieces_above_bytes = kFarBroadcastPiecesAboveBytes;
  };

  // The slot a request of `slot_bytes` gets on a node of `local_size` ranks, and
  // the region of each rank's part the engine needs: a control block, then two
  // (header, slot) pairs (Node's layout asks).
  static size_t slot_size(size_t slot_bytes, int local_size);
  static size_t region_bytes(size_t slot_bytes, int local_size);

  // On `node`'s collectives region (local: Node::create zeroed it). Every wait
  // consults `alive` (may be null; outlives the engine). An error when the
  // segment has no such region or another engine uses it.
  static Status create(std::shared_ptr<Node> node, transport::Liveness* alive,
                       const Options& options, std::unique_ptr<ShmCollectives>* out);

  // OK, or why not (the same on every rank for the same view).
  Status supports(Collective op, const transport::CollectiveView& view) const;
  // Runs the collective to completion (synchronous).
  Status run(Collective op, const transport::CollectiveView& view);

  // Whether the node's ranks can read each other's memory with one copy
  // (peer_read.h; probed by Node::create, the same on every rank of the node).
  bool single_copy() const { return node_->single_copy(); }
  // Whether the source of local rank `rank` for `op` lies in kolo memory and
  // its own part (`part` as transport::Carrier::pack describes it) reaches the
  // threshold at which the peers read it mapped (Note [The peers' sources in
  // kolo memory]); a broadcast's only source is its root's. ShmCarrier asks
  // (Note [Kolo memory does not ride] in carrier.h).
  bool reads_mapped(Collective op, const transport::CollectiveView& part, int rank) const;
  // The size of the largest block from which `op` reads kolo memory mapped.
  size_t direct_min_bytes(Collective op) const {
    return op == Collective::kBroadcast ? options_.broadcast_direct_min_bytes
                                        : options_.shared_direct_min_bytes;
  }
  // Whether this rank's last call wrote its output with streaming stores (tests).
  bool streamed_last_output() const { return streamed_last_output_; }
  // Whether the last call that could stream its slots did (for tests and logs).
  bool streaming_slots() const { return far_; }
  // Rounds run so far, the same on every rank (tests).
  uint64_t rounds_run() const { return next_round_; }

  int local_rank() const { return node_->local_rank(); }
  int local_size() const { return node_->local_size(); }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Call;
  ShmCollectives(std::shared_ptr<Node> node, transport::Liveness* alive, const Options& options);

  Status run_call(Call& call);
  static void publish_span(const void* p, size_t bytes, int64_t* at);
  void write_header(const Call& call, int64_t* header) const;
  Status check_headers(const Call& call) const;
  void post(const Call& call, int64_t k);
  void post_own(const Call& call, char* slot, const char* src, char* out, size_t bytes) const;
  void copy_own(const Call& call, int64_t k) const;
  void consume(const Call& call, int64_t k);
  void run_alone(const Call& call);
  Status copy_direct(const Call& call);
  bool one_pass(const Call& call, size_t out_bytes) const;
  void copy_own_whole(Call& call) const;
  Status decide_slot_stores(Call& call, int64_t largest_bytes);
  int64_t broadcast_piece(const Call& call) const;
  Status reduce_direct(const Call& call);
  Status broadcast_direct(const Call& call);
  bool sources_shared(const Call& call) const;
  int64_t largest_in_view(const Call& call) const;
  bool posted_header_only(const Call& call, int r, int64_t largest) const;
  char* map_span(const int64_t* header, const int64_t* at);
  void map_sources(const Call& call);
  Status allgather_direct(const Call& call);
  Status checked_pushes(const Call& call) const;
  Status read_source(const Call& call, int p, int64_t at, char* dst, int64_t count);
  // Waits until counter `which` of every local rank in [0, n) other than this one
  // (or only of `only` when >= 0) is at least `target`.
  Status wait_peers(int which, uint64_t target, int only = -1);

  uint64_t* counter(int rank, int which) const;
  int64_t* header(int rank, uint64_t round) const;
  char* slot(int rank, uint64_t round) const;

  std::shared_ptr<Node> node_;
  std::vector<char*> bases_;  // each local rank's region
  const Options options_;
  size_t slot_bytes_;
  size_t header_bytes_;
  int64_t pid_ = 0;  // this process's, for the headers
  transport::Liveness* alive_;
  uint64_t next_round_ = 0;   // rounds done so far, the same on every rank
  std::vector<char> staging_;  // an input that overlaps the output (grow-only)
  std::vector<int64_t> displs_in_, displs_out_;  // one per local rank, reused
  Status broken_;
  bool streamed_last_output_ = false;
  std::vector<char> scratch_;  // reduce_direct's peer piece, post's prescaled piece; pre-faulted
  PeerMappings mappings_;                 // the peers' kolo_alloc memory this engine read
  std::vector<const char*> peer_source_;  // this call's, mapped (null: read_peer)
  std::vector<char*> peer_output_;        // a broadcast root's: the receivers' outputs, mapped
  bool far_ = false;  // the node's last verdict when this call began (or the forced answer)
};

}  // namespace kolo::shm
