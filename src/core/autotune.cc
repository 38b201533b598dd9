#include "core/autotune.h"

#include <algorithm>
#include <sstream>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::core {
namespace {

constexpr int64_t kKiB = 1 << 10;
constexpr int64_t kMiB = 1 << 20;
// See Note [What autotune tunes].
constexpr int64_t kFusionCapacity = 64 * kMiB;
constexpr int64_t kSlotCapacity = 2 * kMiB;

// The space's dimensions, in this order.
enum Dim { kFusion, kLarge, kSlice, kSegment, kSmall, kLargeFirst, kHierarchical };
const char* const kDimNames[] = {"KOLO_FUSION_THRESHOLD",  "KOLO_LARGE_TENSOR_BYTES",
                                 "KOLO_SHM_SLICE_BYTES",   "KOLO_RING_SEGMENT_BYTES",
                                 "KOLO_TRANSPORT_SMALL",   "KOLO_TRANSPORT_LARGE",
                                 "KOLO_HIERARCHICAL_ALLREDUCE"};
constexpr const char* kFrozenName = "KOLO_AUTOTUNE_FROZEN";

tune::Dimension labels(const char* name, std::vector<std::string> values) {
  return tune::Dimension{name, {}, std::move(values)};
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, sep)) out.push_back(field);
  return out;
}

// The log's header; the setting's columns are named after its knobs.
std::string log_header() {
  std::string h = "sample,phase";
  for (const char* name : kDimNames) h += std::string(",") + name;
  return h + ",cycles,bytes,seconds,score_MBps";
}

// The frozen setting of a log written by an earlier run, if it has one.
std::optional<TunedSetting> read_frozen(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != log_header()) return std::nullopt;
  std::optional<TunedSetting> frozen;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, ',');
    if (f.size() < 9 || f[1] != "frozen") continue;
    std::string text;
    for (int d = 0; d < 7; ++d) text += std::string(kDimNames[d]) + "=" + f[2 + d] + "\n";
    TunedSetting s;
    if (decode_setting(text + kFrozenName + "=1\n", &s).ok()) frozen = s;
  }
  return frozen;
}

}  // namespace

bool TunedSetting::operator==(const TunedSetting& o) const {
  return fusion_threshold_bytes == o.fusion_threshold_bytes &&
         large_tensor_bytes == o.large_tensor_bytes && shm_slice_bytes == o.shm_slice_bytes &&
         ring_segment_bytes == o.ring_segment_bytes && transport_small == o.transport_small &&
         transport_large == o.transport_large &&
         hierarchical_allreduce == o.hierarchical_allreduce && frozen == o.frozen;
}

TunedSetting setting_of(const Config& c) {
  TunedSetting s;
  s.fusion_threshold_bytes = c.fusion_threshold_bytes;
  s.large_tensor_bytes = c.large_tensor_bytes;
  s.shm_slice_bytes = c.shm_slice_bytes;
  s.ring_segment_bytes = c.ring_segment_bytes;
  s.transport_small = c.transport_small;
  s.transport_large = c.transport_large;
  s.hierarchical_allreduce = c.hierarchical_allreduce;
  return s;
}

std::string encode_setting(const TunedSetting& s) {
  const std::string values[] = {std::to_string(s.fusion_threshold_bytes),
                                std::to_string(s.large_tensor_bytes),
                                std::to_string(s.shm_slice_bytes),
                                std::to_string(s.ring_segment_bytes),
                                s.transport_small,
                                s.transport_large,
                                s.hierarchical_allreduce ? "1" : "0"};
  std::string text;
  for (int d = 0; d < 7; ++d) text += std::string(kDimNames[d]) + "=" + values[d] + "\n";
  if (s.frozen) text += std::string(kFrozenName) + "=1\n";
  return text;
}

// Through the knob parsers, so that a setting is valid exactly when the knobs
// would accept it.
Status decode_setting(const std::string& text, TunedSetting* setting) {
  std::vector<std::pair<std::string, std::string>> env;
  bool frozen = false;
  for (const std::string& line : split(text, '\n')) {
    const size_t eq = line.find('=');
    const std::string name = line.substr(0, eq);
    if (eq == std::string::npos || (name != kFrozenName &&
                                    std::find(std::begin(kDimNames), std::end(kDimNames),
                                              name) == std::end(kDimNames)))
      return invalid_argument("autotune setting: \"" + line + "\" is not KNOB=value of a tuned knob");
    if (name == kFrozenName) frozen = line.substr(eq + 1) == "1";
    else env.emplace_back(name, line.substr(eq + 1));
  }
  if (env.size() != 7) return invalid_argument("autotune setting: expected 7 knobs");
  Config config;
  KOLO_RETURN_IF_ERROR(load_config(
      [&env](const char* name) -> std::optional<std::string> {
        for (const auto& [n, v] : env)
          if (n == name) return v;
        return std::nullopt;
      },
      &config));
  *setting = setting_of(config);
  setting->frozen = frozen;
  return Status::OK();
}

size_t fusion_capacity(const Config& c) {
  return static_cast<size_t>(c.autotune ? std::max(c.fusion_threshold_bytes, kFusionCapacity)
                                        : c.fusion_threshold_bytes);
}

size_t shm_slot_capacity(const Config& c) {
  return static_cast<size_t>(c.autotune ? std::max(c.shm_slice_bytes, kSlotCapacity)
                                        : c.shm_slice_bytes);
}

tune::Space autotune_space(const Config& c, const TunedSetting& start, const TunableWorld& world) {
  const std::vector<std::string>& host = world.host_transports;
  std::vector<tune::Dimension> dims;
  dims.push_back(tune::numeric_dimension(
      kDimNames[kFusion], {64 * kKiB, 256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB},
      start.fusion_threshold_bytes, static_cast<int64_t>(fusion_capacity(c))));
  dims.push_back(tune::numeric_dimension(kDimNames[kLarge], {256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB},
                                         start.large_tensor_bytes, INT64_MAX));
  std::vector<int64_t> slices = {64 * kKiB, 128 * kKiB, 256 * kKiB, 512 * kKiB, kMiB, 2 * kMiB};
  if (!world.node_slices) slices.clear();
  dims.push_back(tune::numeric_dimension(kDimNames[kSlice], slices, start.shm_slice_bytes,
                                         static_cast<int64_t>(shm_slot_capacity(c))));
  dims.push_back(tune::numeric_dimension(kDimNames[kSegment], {64 * kKiB, 256 * kKiB, kMiB},
                                         start.ring_segment_bytes, INT64_MAX));
  const bool choose = c.transport == "auto";
  dims.push_back(labels(kDimNames[kSmall], choose ? host : std::vector<std::string>{start.transport_small}));
  dims.push_back(labels(kDimNames[kLargeFirst], choose ? host : std::vector<std::string>{start.transport_large}));
  std::vector<std::string> hier = {start.hierarchical_allreduce ? "1" : "0"};
  if (world.hierarchical) hier = {"0", "1"};
  dims.push_back(labels(kDimNames[kHierarchical], hier));
  return tune::Space(std::move(dims));
}

tune::Point point_of(const tune::Space& space, const TunedSetting& s) {
  tune::Point p = {tune::index_of(space.dim(kFusion), s.fusion_threshold_bytes),
                   tune::index_of(space.dim(kLarge), s.large_tensor_bytes),
                   tune::index_of(space.dim(kSlice), s.shm_slice_bytes),
                   tune::index_of(space.dim(kSegment), s.ring_segment_bytes),
                   tune::index_of(space.dim(kSmall), s.transport_small),
                   tune::index_of(space.dim(kLargeFirst), s.transport_large),
                   tune::index_of(space.dim(kHierarchical),
                                  std::string(s.hierarchical_allreduce ? "1" : "0"))};
  for (int& i : p) i = std::max(i, 0);
  return p;
}

TunedSetting setting_at(const tune::Space& space, const tune::Point& p) {
  TunedSetting s;
  s.fusion_threshold_bytes = space.dim(kFusion).values[p[kFusion]];
  s.large_tensor_bytes = space.dim(kLarge).values[p[kLarge]];
  s.shm_slice_bytes = space.dim(kSlice).values[p[kSlice]];
  s.ring_segment_bytes = space.dim(kSegment).values[p[kSegment]];
  s.transport_small = space.dim(kSmall).labels[p[kSmall]];
  s.transport_large = space.dim(kLargeFirst).labels[p[kLargeFirst]];
  s.hierarchical_allreduce = space.dim(kHierarchical).labels[p[kHierarchical]] == "1";
  return s;
}

void AutotuneRecord::applied(uint64_t cycle, const TunedSetting& setting) {
  const std::string text = std::to_string(cycle) + ":" + encode_setting(setting);
  std::lock_guard<std::mutex> lock(mu_);
  for (unsigned char c : text) state_.digest = (state_.digest ^ c) * 1099511628211ull;
  state_.frozen = setting.frozen;
  ++state_.changes;
}

void AutotuneRecord::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State{};
}

AutotuneRecord::State AutotuneRecord::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

Status AutotuneDriver::create(const Config& config, tune::Space space, const TunedSetting& start,
                              std::unique_ptr<AutotuneDriver>* out) {
  const std::string& path = config.autotune_log;
  if (!path.empty()) {
    if (std::optional<TunedSetting> frozen = read_frozen(path)) {
      KOLO_LOG(kInfo) << "autotune: reusing the frozen setting in " << path
                      << " (delete it to tune again):\n" << encode_setting(*frozen);
      out->reset(new AutotuneDriver(tune::Autotuner::frozen_at(space, point_of(space, *frozen)), ""));
      (*out)->reused_ = frozen;
      return Status::OK();
    }
  }
  tune::AutotuneOptions options;
  options.warmup_samples = static_cast<int>(config.autotune_warmup_samples);
  options.sample_seconds = config.autotune_sample_seconds;
  options.search.max_samples = static_cast<int>(config.autotune_max_samples);
  options.search.min_samples = std::min(options.search.min_samples, options.search.max_samples);
  const tune::Point first = point_of(space, start);
  out->reset(new AutotuneDriver(tune::Autotuner(std::move(space), first, options), path));
  if (!path.empty()) {
    (*out)->log_.open(path, std::ios::trunc);
    if (!(*out)->log_) return invalid_argument("KOLO_AUTOTUNE_LOG=\"" + path + "\": cannot write it");
    (*out)->log_ << log_header() << "\n" << std::flush;
  }
  return Status::OK();
}

AutotuneDriver::AutotuneDriver(tune::Autotuner tuner, std::string log_path)
    : tuner_(std::move(tuner)), log_path_(std::move(log_path)) {}

std::optional<TunedSetting> AutotuneDriver::cycle_done(uint64_t bytes, Clock::time_point end,
                                                       bool at_rest) {
  const bool changed =
      tuner_.cycle_done(bytes, std::chrono::duration<double>(end - epoch_).count(), at_rest);
  write_rows();
  if (!changed) return std::nullopt;
  TunedSetting next = setting_at(tuner_.space(), tuner_.current());
  next.frozen = tuner_.frozen();
  if (next.frozen) {
    TunedSetting knobs = next;
    knobs.frozen = false;
    KOLO_LOG(kInfo) << "autotune: frozen after " << tuner_.search().samples()
                    << " samples; to reuse it, export\n" << encode_setting(knobs);
  }
  return next;
}

void AutotuneDriver::write_rows() {
  for (const tune::SampleRow& r : tuner_.take_rows()) {
    if (!log_) continue;
    const TunedSetting s = setting_at(tuner_.space(), r.point);
    log_ << r.sample << "," << r.phase << "," << s.fusion_threshold_bytes << ","
         << s.large_tensor_bytes << "," << s.shm_slice_bytes << "," << s.ring_segment_bytes << ","
         << s.transport_small << "," << s.transport_large << "," << (s.hierarchical_allreduce ? 1 : 0)
         << "," << r.cycles << "," << r.bytes << "," << r.seconds << "," << r.score / 1e6 << "\n";
    if (r.phase == "frozen") {
      log_ << "# frozen; to reuse it without this file, export:\n";
      TunedSetting frozen = s;  // exported as knobs: frozen is no knob
      for (const std::string& line : split(encode_setting(frozen), '\n')) log_ << "# " << line << "\n";
    }
    log_ << std::flush;
  }
}

}  // namespace kolo::core
