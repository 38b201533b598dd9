// The coordinator's part in diagnosing a hang: it feeds the flight recorder, dumps
// it, and answers a stall report. See flight_recorder.h and Note [Stall reports].
#include <algorithm>

#include "common/logging.h"
#include "core/coordinator.h"

namespace kolo::core {

Coordinator::~Coordinator() {
  if (owns_dump_signal_) uninstall_dump_signal();
}

void Coordinator::init_flight_recorder() {
  negotiator_.set_reporter([this] { return rank_report(); });
  if (!flight_.enabled()) return;
  executor_.set_flight_recorder(&flight_);
  owns_dump_signal_ = install_dump_signal();
  if (!owns_dump_signal_)
    KOLO_LOG(kWarning) << "could not install the SIGUSR1 handler; the flight recorder dumps on "
                          "stalls and failures only";
  dump_signals_seen_ = dump_signals();
}

void Coordinator::record_negotiated(const std::vector<Response>& ready,
                                    Clock::time_point cycle_start, Clock::time_point now) {
  for (const Response& r : ready) {
    auto it = pending_.find(r.name);
    if (it == pending_.end()) continue;
    TensorEntry& e = it->second;
    if (flight_.enabled()) flight_.advance(e.flight, FlightRecorder::State::kNegotiated, now);
    if (!e.handle) continue;
    e.handle->stamp(HandleState::kCycleStarted, std::max(cycle_start, e.enqueued));
    e.handle->stamp(HandleState::kNegotiated, now);
  }
}

void Coordinator::dump_if_signalled() {
  const uint32_t signals = dump_signals();
  if (signals == dump_signals_seen_) return;
  dump_signals_seen_ = signals;
  dump_flight_recorder("SIGUSR1");
}

void Coordinator::dump_flight_recorder(const std::string& reason) {
  if (!flight_.enabled()) return;
  const transport::Topology& topology = world_.control->topology();
  FlightRecorder::DumpInfo info;
  info.rank = topology.rank;
  info.size = topology.size;
  info.reason = reason;
  info.last_submission = last_submission_;
  const std::string path = flight_dump_path(config_.flight_recorder_dir, topology.rank);
  if (Status s = flight_.dump(path, info); !s.ok()) {
    KOLO_LOG(kError) << "flight recorder (" << reason << "): " << s.message()
                     << " (KOLO_FLIGHT_RECORDER_DIR)";
    return;
  }
  KOLO_LOG(kWarning) << "flight recorder (" << reason << "): wrote the last "
                     << std::min<uint64_t>(flight_.recorded(), flight_.capacity())
                     << " operations to " << path
                     << "; tools/kolo_flight.py merges the ranks' dumps";
}

RankReport Coordinator::rank_report() const {
  RankReport report;
  if (last_submission_ != Clock::time_point{})
    report.idle_seconds = std::chrono::duration<double>(Clock::now() - last_submission_).count();
  std::vector<const TensorEntry*> entries;
  for (const auto& [name, entry] : pending_) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->enqueued < b->enqueued; });
  report.pending_total = static_cast<uint32_t>(entries.size());
  for (size_t i = 0; i < entries.size() && i < kMaxReportedNames; ++i)
    report.pending.push_back(entries[i]->request.name);
  return report;
}

}  // namespace kolo::core
