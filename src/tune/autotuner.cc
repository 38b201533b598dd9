#include "tune/autotuner.h"

namespace kolo::tune {

Autotuner::Autotuner(Space space, Point start, AutotuneOptions options)
    : search_(std::move(space), start, options.search), options_(options), current_(start) {}

Autotuner Autotuner::frozen_at(Space space, Point point) {
  Autotuner t(std::move(space), point, AutotuneOptions{});
  t.frozen_ = true;
  return t;
}

bool Autotuner::cycle_done(uint64_t bytes, double now, bool at_rest) {
  if (frozen_) return false;
  if (!started_) {  // the clock starts at the end of the first cycle seen
    started_ = true;
    began_ = now;
    return false;
  }
  if (settling_) {
    settled_bytes_ = settled_bytes_ || bytes > 0;
    if (settled_bytes_ && at_rest) {
      settling_ = settled_bytes_ = false;
      began_ = now;
    }
    return false;
  }
  bytes_ += bytes;
  ++cycles_;
  const double elapsed = now - began_;
  if (bytes_ == 0 || elapsed < options_.sample_seconds) return false;
  if (!at_rest && elapsed < 4 * options_.sample_seconds) return false;
  const Point before = current_;
  finish_sample(now);
  return frozen_ || current_ != before;
}

void Autotuner::finish_sample(double now) {
  SampleRow row;
  row.sample = ++sample_;
  row.point = current_;
  row.bytes = bytes_;
  row.cycles = cycles_;
  row.seconds = now - began_;
  row.score = row.seconds > 0 ? static_cast<double>(bytes_) / row.seconds : 0.0;
  const bool warmup = sample_ <= options_.warmup_samples;
  row.phase = warmup ? "warmup" : "sample";
  rows_.push_back(row);
  began_ = now;
  bytes_ = 0;
  cycles_ = 0;
  if (warmup) return;
  search_.observe(row.score);
  if (search_.done()) {
    frozen_ = true;
    current_ = search_.best();
    SampleRow last;
    last.sample = sample_;
    last.phase = "frozen";
    last.point = current_;
    rows_.push_back(last);
  } else {
    current_ = search_.next();
  }
  settling_ = true;
}

std::vector<SampleRow> Autotuner::take_rows() {
  std::vector<SampleRow> rows;
  rows.swap(rows_);
  return rows;
}

}  // namespace kolo::tune
