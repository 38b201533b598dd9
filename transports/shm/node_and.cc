#include "transports/shm/node_and.h"

#include <algorithm>
#include <string>

#include "common/check.h"
#include "common/wait_policy.h"
#include "transports/shm/counter.h"

namespace kolo::shm {
namespace {

// Note [The node AND's spin]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Acquire loads between pauses before a peer's sequence is waited for
// (wait_for_counter, which then yields): few, and none where the node has more
// ranks than cores. There a peer that has not posted is most often one waiting
// for this core, and every pause delays the yield that lets it run: four ranks
// on two cores, bound, an 8-byte blocking allreduce took 4.40-6.22 us (median
// 4.48) without the loads against 4.84-6.69 (4.93) with sixteen, 14 rounds
// each; two ranks on two cores keep them, their peer runs beside them
// (docs/perf/small-ops.md, "The node AND's spin").
constexpr int kSpinLoads = 16;
// Acquire loads of a peer's sequence before a late peer is rung (Note [Ringing
// only the late] in node_and.h).
constexpr int kLateLoads = 4;

}  // namespace

Status NodeAnd::create(std::shared_ptr<Node> node, transport::Liveness* alive,
                       std::unique_ptr<NodeAnd>* out) {
  KOLO_RETURN_IF_ERROR(node->claim(Node::Region::kNodeAnd, "the node AND"));
  const bool crowded = WaitPolicy::for_node(node->local_size(), false).crowded();
  out->reset(new NodeAnd(std::move(node), alive, crowded ? 0 : kSpinLoads));
  return Status::OK();
}

uint64_t* NodeAnd::sequence(int rank, uint64_t call) const {
  return reinterpret_cast<uint64_t*>(node_->at(rank, node_->layout().node_and) +
                                     (call % 2) * kSlotBytes);
}

uint64_t* NodeAnd::slot(int rank, uint64_t call) const {
  return sequence(rank, call) + kHeaderWords;
}

char* NodeAnd::carry_slot(size_t words, bool in_line) {
  KOLO_CHECK_LE(words, kMaxWords);
  in_line_ = in_line;
  return reinterpret_cast<char*>(sequence(node_->local_rank(), calls_)) +
         carry_offset(words, in_line);
}

const char* NodeAnd::carried(int rank) const {
  return reinterpret_cast<const char*>(sequence(rank, calls_ - 1)) + carried_at_;
}

Status NodeAnd::run(std::vector<uint64_t>* bits, Late late, void* context) {
  unanimous_ = false;
  if (bits->size() > kMaxWords) {
    return invalid_argument("node AND of " + std::to_string(bits->size()) + " words; at most " +
                            std::to_string(kMaxWords));
  }
  KOLO_RETURN_IF_ERROR(broken_);
  const uint64_t call = calls_++;
  carried_at_ = carry_offset(bits->size(), in_line_);
  in_line_ = false;
  const int me = node_->local_rank();
  uint64_t* mine = slot(me, call);
  std::copy(bits->begin(), bits->end(), mine);
  publish_counter(sequence(me, call), call + 1);
  uint64_t differ = 0;  // OR of every peer's words XOR this rank's
  for (int p = 0; p < node_->local_size(); ++p) {
    if (p == me) continue;
    if (late != nullptr) {  // Note [Ringing only the late]
      int looks = 0;
      while (__atomic_load_n(sequence(p, call), __ATOMIC_ACQUIRE) < call + 1 && ++looks < kLateLoads)
        __builtin_ia32_pause();
      if (looks == kLateLoads) {
        late(context);
        late = nullptr;
      }
    }
    Status arrived = wait_for_counter(sequence(p, call), call + 1, spin_loads_, alive_);
    if (!arrived.ok()) {
      broken_ = arrived;
      return broken_;
    }
    const uint64_t* theirs = slot(p, call);
    for (size_t w = 0; w < bits->size(); ++w) {
      (*bits)[w] &= theirs[w];
      differ |= theirs[w] ^ mine[w];
    }
  }
  unanimous_ = differ == 0;
  return Status::OK();
}

}  // namespace kolo::shm
