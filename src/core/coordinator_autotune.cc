// The coordinator's side of autotune (core/autotune.h): the knobs' setting at
// init, rank 0's driver after every cycle, and every rank applying what rank 0
// announced before it executes the cycle that carried it.
#include "common/check.h"
#include "common/logging.h"
#include "core/coordinator.h"

namespace kolo::core {
namespace {

// A transport's first choice as autotune names it: "auto" resolves to the
// transport the auto order tries first for a CPU bucket of `bytes`.
std::string resolved(const transport::Selector& selector, const std::string& choice, size_t bytes) {
  if (choice != "auto") return choice;
  transport::Bucket probe;
  probe.dtype = DataType::kUint8;
  probe.count = static_cast<int64_t>(bytes);
  probe.device = Device{DeviceKind::kCpu, 0, nullptr};
  const std::vector<std::string> order = selector.auto_order(probe);
  return order.empty() ? choice : order.front();
}

}  // namespace

Status Coordinator::init_autotune() {
  KOLO_RETURN_IF_ERROR(
      selector_.validate_first_choice("KOLO_TRANSPORT_SMALL", config_.transport_small));
  KOLO_RETURN_IF_ERROR(
      selector_.validate_first_choice("KOLO_TRANSPORT_LARGE", config_.transport_large));
  TunedSetting start = setting_of(config_);
  apply_setting(start);  // the knobs' own values, on every rank alike
  autotune_record_->reset();
  if (!config_.autotune || world_.control->topology().rank != 0) return Status::OK();
  start.transport_small = resolved(selector_, start.transport_small, 1);
  start.transport_large =
      resolved(selector_, start.transport_large, transport::Selector::kSmallBucketBytes);
  TunableWorld tunable;
  tunable.host_transports = selector_.host_transports();
  for (const auto& t : world_.transports)
    tunable.node_slices |= t->capabilities().chunk == transport::Chunk::kNodeSlice;
  tunable.hierarchical = selector_.can_prefer_hierarchical();
  tune::Space space = autotune_space(config_, start, tunable);
  KOLO_RETURN_IF_ERROR(AutotuneDriver::create(config_, std::move(space), start, &autotune_));
  if (autotune_->reused()) negotiator_.announce(encode_setting(*autotune_->reused()));
  return Status::OK();
}

void Coordinator::apply_setting(const TunedSetting& s) {
  executor_.set_sizes(static_cast<size_t>(s.fusion_threshold_bytes),
                      static_cast<size_t>(s.large_tensor_bytes));
  selector_.set_first_choices(s.transport_small, s.transport_large);
  selector_.set_prefer_hierarchical(s.hierarchical_allreduce);
  transport::Tuning tuning;
  tuning.slice_bytes = static_cast<size_t>(s.shm_slice_bytes);
  tuning.segment_bytes = static_cast<size_t>(s.ring_segment_bytes);
  for (auto& t : world_.transports) t->tune(tuning);
  autotune_record_->applied(negotiator_.cycles(), s);
}

void Coordinator::take_announced_setting() {
  std::string text;
  if (!negotiator_.take_announcement(&text)) return;
  TunedSetting s;
  // Rank 0 encoded it from valid knob values; the same bytes reach every rank,
  // so a failure here would be the same everywhere and leaves the old setting.
  if (Status d = decode_setting(text, &s); !d.ok()) {
    KOLO_LOG(kError) << "autotune: " << d.to_string();
    return;
  }
  KOLO_LOG(kDebug) << "autotune: cycle " << negotiator_.cycles() << " applies\n" << text;
  apply_setting(s);
}

void Coordinator::tune_after_cycle() {
  if (!autotune_) return;
  const uint64_t total = executor_.allreduced_bytes();
  // At rest: nothing of this rank's in flight or queued. See Note [Samples end
  // at rest] (a step whose submissions straddle a cycle is not at rest between).
  const bool at_rest = pending_.empty() && !executor_.busy() && !queue_.has_queued();
  std::optional<TunedSetting> next =
      autotune_->cycle_done(total - bytes_before_cycle_, Clock::now(), at_rest);
  bytes_before_cycle_ = total;
  if (next) negotiator_.announce(encode_setting(*next));
}

}  // namespace kolo::core
