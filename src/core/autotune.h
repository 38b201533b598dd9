// Autotune in the coordinator: what a setting is, how it travels, and rank 0's
// driver that turns cycles into samples (tune/autotuner.h) and writes the log.
//
// Every rank applies the same TunedSetting at the same cycle: rank 0 decides and
// announces it with the negotiation (Note [Announcements] in negotiator.h); the
// others only apply what they receive. See Note [What autotune tunes].
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/status.h"
#include "tune/autotuner.h"

namespace kolo::core {

// One value of everything autotune tunes: the knobs of the same names.
struct TunedSetting {
  int64_t fusion_threshold_bytes = 0;
  int64_t large_tensor_bytes = 0;
  int64_t shm_slice_bytes = 0;
  int64_t ring_segment_bytes = 0;
  std::string transport_small = "auto";
  std::string transport_large = "auto";
  bool hierarchical_allreduce = false;
  bool frozen = false;  // the search is over: this setting stays

  bool operator==(const TunedSetting& o) const;
  bool operator!=(const TunedSetting& o) const { return !(*this == o); }
};

// The setting the knobs ask for.
TunedSetting setting_of(const Config& config);

// The setting as the lines a user exports ("KOLO_FUSION_THRESHOLD=67108864\n"...,
// and KOLO_AUTOTUNE_FROZEN=1 when frozen): also how it travels in announcements.
std::string encode_setting(const TunedSetting& setting);
// The inverse; an error names the line that is not a setting.
Status decode_setting(const std::string& text, TunedSetting* setting);

// What must be allocated at init so that any setting autotune may pick fits:
// the fusion buffer and the shm slot (the knob's value when autotune is off).
size_t fusion_capacity(const Config& config);
size_t shm_slot_capacity(const Config& config);

// What the world's transports leave to tune (from their capabilities and the
// selector: the coordinator fills it in).
struct TunableWorld {
  std::vector<std::string> host_transports;  // the first-choice candidates
  bool node_slices = false;    // a transport is cut in node slices (Chunk::kNodeSlice)
  bool hierarchical = false;   // KOLO_HIERARCHICAL_ALLREDUCE can change a choice
};

// The search space around `start` (the knobs' setting): fusion threshold,
// large-tensor cut-off, shm slice, ring segment, the first transport of each size
// class among the host transports, and hierarchical on/off. A dimension that
// cannot matter in `world` has one candidate.
tune::Space autotune_space(const Config& config, const TunedSetting& start,
                           const TunableWorld& world);
tune::Point point_of(const tune::Space& space, const TunedSetting& setting);
TunedSetting setting_at(const tune::Space& space, const tune::Point& point);

// What autotune has done on one rank: how many settings it applied, whether the
// last was frozen, and a digest of every (cycle, setting) applied — equal on ranks
// that applied the same settings at the same cycles. Written by the coordinator
// thread, read from any.
class AutotuneRecord {
 public:
  struct State {
    bool frozen = false;
    int64_t changes = 0;
    uint64_t digest = 14695981039346656037ull;  // FNV-1a's offset basis
  };
  void applied(uint64_t cycle, const TunedSetting& setting);
  void reset();
  State state() const;

 private:
  mutable std::mutex mu_;
  State state_;
};

// Rank 0's side. Coordinator thread only.
class AutotuneDriver {
 public:
  using Clock = std::chrono::steady_clock;

  // Searches from `start` over `space`, or, when KOLO_AUTOTUNE_LOG holds a frozen
  // setting (from an earlier run), announces that one and does not search.
  static Status create(const Config& config, tune::Space space, const TunedSetting& start,
                       std::unique_ptr<AutotuneDriver>* out);

  // The setting read back from the log, to announce with the first cycle.
  const std::optional<TunedSetting>& reused() const { return reused_; }
  // After each cycle: the bytes it reduced and its end. A setting to announce,
  // if it changes.
  std::optional<TunedSetting> cycle_done(uint64_t bytes, Clock::time_point end, bool at_rest);

 private:
  AutotuneDriver(tune::Autotuner tuner, std::string log_path);
  void write_rows();

  tune::Autotuner tuner_;
  std::string log_path_;
  std::ofstream log_;
  Clock::time_point epoch_ = Clock::now();
  std::optional<TunedSetting> reused_;
};

// Note [What autotune tunes]
// The knobs that shape the data path and can change between cycles without
// reallocating anything: the fusion threshold (up to the fusion buffer, which
// autotune allocates at 64 MiB or the knob's value if larger), the large-tensor
// cut-off, the shm slice (up to the slot, which autotune allocates at 2 MiB), the
// ring segment (its scratch grows once), the first transport tried for small
// (< 64 KiB) and large host buckets, and hierarchical on/off where several nodes
// offer it. The knobs fixed at init (cache capacity, KOLO_TRANSPORT, the device
// transport's buffers) are not tuned. A setting changes only at a cycle every rank
// takes together, so every rank cuts the same buckets and picks the same
// transports (docs/design.md, Rules, 4).

}  // namespace kolo::core
