// ShmCollectives: allgather(v), broadcast, alltoall(v) and reducescatter inside
// one node, through kolo's own shared-memory window; the "shm" transport's
// collectives other than allreduce (ShmTransport::collective).
//
// Contract (see transport/transport.h, CollectiveView): called by the coordinator
// thread only, for collectives in the same order on every rank of the node; CPU
// memory; every dtype; reducescatter with SUM, MIN, MAX, PRODUCT and the whole
// Reduction (prescale, postscale, integer division) applied here. The view's
// rank indices are local ranks (shm is offered when the world is one node). The
// algorithm is explained at the top of shm_collectives.cc. After create() no MPI
// call happens: ranks synchronise through counters in the shared window.
//
// Errors: supports() answers the same on every rank for the same view. Ranks
// whose views disagree (op, dtype, counts, root) all return the same
// Mismatch naming the field and two ranks' values, and the engine stays
// usable. A peer that has failed (the Liveness given to create() says so) fails
// the call; the engine is then broken and fails every later call. Waiting spins
// briefly, then yields, then sleeps (mpi_wait.h, wait_for_counter).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transports/mpi/core_distance.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/shm_window.h"

namespace kolo::mpi {

class ShmCollectives {
 public:
  // Bytes of one slot: what a rank publishes per round. See Note [Collective slot size].
  static constexpr size_t kDefaultSlotBytes = size_t{1} << 20;

  // Collective over `local` (the node communicator): allocates and pre-faults the
  // window (a control block, then two headers and two slots per rank). Every
  // wait consults `alive` (may be null; outlives the engine).
  static Status create(MPI_Comm local, size_t slot_bytes, Liveness* alive,
                       std::unique_ptr<ShmCollectives>* out);

  // OK, or why not (the same on every rank for the same view).
  Status supports(transport::CollectiveOp op, const transport::CollectiveView& view) const;
  // Runs the collective to completion (synchronous).
  Status run(transport::CollectiveOp op, const transport::CollectiveView& view);

  // Whether the node's ranks can read each other's memory with one copy
  // (peer_read.h; probed at create(), the same on every rank of the node).
  bool single_copy() const { return single_copy_; }
  // Calls whose largest block has at least this many bytes copy straight from
  // the peers' buffers when single_copy() (Note [Single copy for large calls]);
  // the same on every rank, before the next run(). Tests set 0 (always) or
  // SIZE_MAX (never).
  void set_single_copy_min_bytes(size_t bytes) { single_copy_min_bytes_ = bytes; }
  static constexpr size_t kSingleCopyMinBytes = SIZE_MAX;
  // Allgathers and alltoalls whose output has at least kStreamOutputMinBytes,
  // and broadcasts of at least kBroadcastStreamOutputMinBytes, write their
  // output with streaming stores (Note [Streaming the output]). Tests and the
  // bench set one size for all three: 0 (always) or SIZE_MAX (never).
  void set_stream_output_min_bytes(size_t bytes) {
    stream_output_min_bytes_ = bytes;
    broadcast_stream_output_min_bytes_ = bytes;
  }
  // Whether this rank's last call wrote its output with streaming stores (tests).
  bool streamed_last_output() const { return streamed_last_output_; }
  static constexpr size_t kStreamOutputMinBytes = size_t{4} << 20;
  static constexpr size_t kBroadcastStreamOutputMinBytes = size_t{16} << 20;

  // How round pieces are written into the slots (Note [Streaming slots across
  // distant cores]): kAuto measures the cores' distance; tests and the bench
  // force either way. The same on every rank, before the next run().
  enum class SlotStores { kAuto, kPlain, kStreaming };
  void set_slot_stores(SlotStores mode) { slot_stores_ = mode; }
  // Calls whose largest block has at least this many bytes may stream their
  // slots (Note [Streaming slots across distant cores] says why 2 KiB). Tests
  // and the bench set other sizes (the same on every rank, before the next run()).
  void set_stream_slot_min_bytes(size_t bytes) { stream_slot_min_bytes_ = bytes; }
  static constexpr size_t kStreamSlotMinBytes = size_t{2} << 10;
  // Whether the last call that could stream its slots did (for tests and logs).
  bool streaming_slots() const { return far_; }
  // Broadcasts of up to this many bytes, between cores that share a cache, run in
  // pieces of an eighth (at least 4 KiB) so that the receivers copy one while the
  // root writes the next (Note [Small broadcasts in pieces, near]). Tests and the
  // bench set other sizes (0: never); the same on every rank, before the next run().
  void set_broadcast_pieces_max_bytes(size_t bytes) { broadcast_pieces_max_bytes_ = bytes; }
  static constexpr size_t kBroadcastPiecesMaxBytes = size_t{64} << 10;
  static constexpr size_t kBroadcastPieces = 8;
  static constexpr size_t kMinBroadcastPieceBytes = size_t{4} << 10;
  // Broadcasts of more than this many bytes, between cores far apart, run in
  // pieces of a quarter, at least kFarBroadcastPieceMinBytes and at most
  // kFarBroadcastPieceMaxBytes, so that the receivers read one while the root
  // streams the next (Note [Large broadcasts in pieces, far]). Tests and the
  // bench set other sizes (SIZE_MAX: never); the same on every rank, before the
  // next run().
  void set_far_broadcast_pieces_above_bytes(size_t bytes) { far_broadcast_pieces_above_ = bytes; }
  static constexpr size_t kFarBroadcastPiecesAboveBytes = size_t{128} << 10;
  static constexpr size_t kFarBroadcastPieceMinBytes = size_t{128} << 10;
  static constexpr size_t kFarBroadcastPieceMaxBytes = size_t{256} << 10;
  // Rounds run so far, the same on every rank (tests).
  uint64_t rounds_run() const { return next_round_; }

  int local_rank() const { return window_->local_rank(); }
  int local_size() const { return window_->local_size(); }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Call;
  ShmCollectives(std::unique_ptr<ShmWindow> window, size_t slot_bytes, Liveness* alive);

  Status run_call(Call& call);
  void write_header(const Call& call, int64_t* header) const;
  Status check_headers(const Call& call) const;
  void post(const Call& call, int64_t k);
  void post_own(const Call& call, char* slot, const char* src, char* out, size_t bytes) const;
  void copy_own(const Call& call, int64_t k) const;
  void consume(const Call& call, int64_t k);
  void run_alone(const Call& call);
  Status copy_direct(const Call& call);
  Status decide_slot_stores(Call& call, int64_t largest_bytes);
  int64_t broadcast_piece(const Call& call) const;
  Status calibrate();
  Status reduce_direct(const Call& call);
  // Waits until counter `which` of every local rank in [0, n) other than this one
  // (or only of `only` when >= 0) is at least `target`.
  Status wait_peers(int which, uint64_t target, int only = -1);

  uint64_t* counter(int rank, int which) const;
  int64_t* header(int rank, uint64_t round) const;
  char* slot(int rank, uint64_t round) const;

  std::unique_ptr<ShmWindow> window_;
  size_t slot_bytes_;
  size_t header_bytes_;
  int64_t pid_ = 0;  // this process's, for the headers
  Liveness* alive_;
  uint64_t next_round_ = 0;   // rounds done so far, the same on every rank
  std::vector<char> staging_;  // an input that overlaps the output (grow-only)
  std::vector<int64_t> displs_in_, displs_out_;  // one per local rank, reused
  Status broken_;
  bool single_copy_ = false;
  size_t single_copy_min_bytes_ = kSingleCopyMinBytes;
  size_t stream_output_min_bytes_ = kStreamOutputMinBytes;
  size_t broadcast_stream_output_min_bytes_ = kBroadcastStreamOutputMinBytes;
  bool streamed_last_output_ = false;
  std::vector<char> scratch_;  // reduce_direct's peer piece, post's prescaled piece; pre-faulted
  SlotStores slot_stores_ = SlotStores::kAuto;
  size_t stream_slot_min_bytes_ = kStreamSlotMinBytes;
  size_t broadcast_pieces_max_bytes_ = kBroadcastPiecesMaxBytes;
  size_t far_broadcast_pieces_above_ = kFarBroadcastPiecesAboveBytes;
  bool far_ = false;              // the last calibration's (or the forced) answer
  RecalibrationClock recalibration_;  // fed calls of stream_slot_min_bytes_ and up, alike on every rank
  uint64_t calibrations_ = 0;
};

}  // namespace kolo::mpi
