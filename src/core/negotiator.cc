#include "core/negotiator.h"

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "core/wire.h"

namespace kolo::core {
namespace {

constexpr uint64_t kFlagSlowPath = 1ull << 0;  // someone has uncached requests
constexpr uint64_t kFlagShutdown = 1ull << 1;  // someone asks every rank to stop
constexpr uint64_t kFlagReport = 1ull << 2;    // rank 0 asks for a stall report
constexpr uint64_t kFlagTimeline = 1ull << 3;  // someone records a timeline
constexpr uint64_t kFlagAnnounce = 1ull << 4;  // rank 0 announces (Note [Announcements])
constexpr uint64_t kFlagCarried = 1ull << 5;   // this rank packed (Note [Data rides with the AND])
// ...in its vector's line (Note [The carry shares the vector's line] in
// transports/shm/node_and.h): a rank that packed elsewhere sends another vector.
constexpr uint64_t kFlagCarriedInLine = 1ull << 6;
// The flags word's upper half carries cache_words() (Note [An AND as long as the
// cache in use]).
constexpr int kWordsShift = 32;

double seconds(Negotiator::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Negotiator::Negotiator(transport::ControlPlane& control, const Config& config)
    : control_(control),
      config_(config),
      rank_(control.topology().rank),
      size_(control.topology().size),
      cache_(static_cast<size_t>(config.cache_capacity)),
      table_(control.topology().size) {
  // A request that waits in the cache longer than the stall check time leaves it
  // for the slow path, where rank 0 can see which ranks are missing.
  double check = config.stall_check_seconds;
  double shut = config.stall_shutdown_seconds;
  cache_stall_seconds_ = check > 0 && shut > 0 ? std::min(check, shut) : std::max(check, shut);
  last_stall_warning_ = Clock::now();
}

void Negotiator::add(const Request& request, Clock::time_point enqueued) {
  if (request.params.collective == Collective::kJoin) joined_ = true;
  if (!is_cacheable(request.params.collective)) {
    to_send_.push_back(request);
    return;
  }
  uint32_t bit = 0;
  switch (cache_.lookup(request, &bit)) {
    case ResponseCache::Lookup::kHit:
      wait_on(bit, request, enqueued);
      return;
    case ResponseCache::Lookup::kStale:
      invalid_.insert(bit);
      break;
    case ResponseCache::Lookup::kMiss:
      break;
  }
  to_send_.push_back(request);
}

void Negotiator::collect_stale_waits(Clock::time_point now) {
  if (cache_stall_seconds_ <= 0) return;
  for (const auto& [bit, w] : waiting_)
    if (seconds(now - w.since) >= cache_stall_seconds_) invalid_.insert(bit);
}

bool Negotiator::has_news(Clock::time_point now) const {
  if (!to_send_.empty() || !invalid_.empty() || !stall_failures_.empty() || report_due_)
    return true;
  if (cache_stall_seconds_ > 0) {
    for (const auto& [bit, w] : waiting_)
      if (seconds(now - w.since) >= cache_stall_seconds_) return true;
  }
  if (rank_ == 0 && config_.stall_shutdown_seconds > 0 && table_.pending() > 0)
    return !table_.stalls(now, config_.stall_shutdown_seconds).empty();
  return false;
}

Negotiator::Clock::time_point Negotiator::next_deadline(Clock::time_point now) const {
  // Timers are coarse (seconds); waking once a second to look is plenty.
  return now + std::chrono::seconds(1);
}

void Negotiator::empty_bits(bool shutdown, bool slow_path, std::vector<uint64_t>* out) const {
  const size_t words = 1 + 3 * cache_words();
  out->assign(words, 0);
  std::vector<uint64_t>& bits = *out;
  uint64_t flags = (slow_path ? kFlagSlowPath : 0) | (shutdown ? kFlagShutdown : 0) |
                   (recording_ ? kFlagTimeline : 0) |
                   (static_cast<uint64_t>(cache_words()) << kWordsShift);
  bits[0] = ~flags;  // inverted: the AND computes the OR of the flags
  for (size_t w = 1 + cache_words(); w < words; ++w) bits[w] = ~0ull;
}

void Negotiator::mark_ready(uint32_t bit, std::vector<uint64_t>* out) const {
  std::vector<uint64_t>& bits = *out;
  KOLO_CHECK(bit < 64 * cache_words());  // an occupied bit: below the high water
  bits[ready_word(bit)] |= 1ull << (bit % 64);
  bits[held_word(bit)] &= ~(1ull << (bit % 64));
}

void Negotiator::build_bits(bool shutdown, bool slow_path, std::vector<uint64_t>* out) const {
  empty_bits(shutdown, slow_path, out);
  std::vector<uint64_t>& bits = *out;
  for (const auto& [bit, w] : waiting_)
    if (invalid_.count(bit) == 0) mark_ready(bit, out);
  for (uint32_t bit : invalid_) {
    KOLO_CHECK(bit < 64 * cache_words());
    bits[invalid_word(bit)] &= ~(1ull << (bit % 64));
  }
  if (joined_) {
    // See Note [Join]: a joined rank agrees to every cached allreduce (it will
    // contribute zeros) and declares every other cached entry invalid, so that
    // those names take the slow path and fail there.
    for (uint32_t bit = 0; bit < cache_.high_water(); ++bit) {
      if (!cache_.occupied(bit)) continue;
      if (is_allreduce(cache_.at(bit).params.collective))
        bits[ready_word(bit)] |= 1ull << (bit % 64);
      else
        bits[invalid_word(bit)] &= ~(1ull << (bit % 64));
    }
  }
}

void Negotiator::evict(uint32_t bit) {
  if (cache_.occupied(bit)) cache_.erase(bit);
  requeue_waiting(bit);
}

void Negotiator::requeue_waiting(uint32_t bit) {
  auto it = waiting_.find(bit);
  if (it != waiting_.end()) {
    to_send_.push_back(std::move(it->second.request));
    waiting_.erase(it);
  }
}

// Note [A cached operation's storage is reused]: the node (and the request's
// strings and vectors) of a wait that ended.
void Negotiator::wait_on(uint32_t bit, const Request& request, Clock::time_point since) {
  auto node = spare_waits_.take();
  if (!node) {
    KOLO_CHECK(waiting_.emplace(bit, Waiting{request, since}).second);
    return;
  }
  node.key() = bit;
  node.mapped().request = request;
  node.mapped().since = since;
  KOLO_CHECK(waiting_.insert(std::move(node)).inserted);
}

void Negotiator::stop_waiting(uint32_t bit) { spare_waits_.keep(waiting_.extract(bit)); }

Status Negotiator::cycle(bool shutdown, Clock::time_point now, std::vector<Response>* ready,
                         bool* stop, bool* carried) {
  Status s = negotiate(shutdown, now, ready, stop, carried);
  if (!s.ok()) ready->clear();
  return s;
}

Status Negotiator::negotiate(bool shutdown, Clock::time_point now, std::vector<Response>* ready,
                             bool* stop, bool* carried) {
  if (carried != nullptr) *carried = false;
  collect_stale_waits(now);
  if (rank_ == 0 && config_.stall_shutdown_seconds > 0 && table_.pending() > 0) {
    auto stalls = table_.stalls(now, config_.stall_shutdown_seconds);
    if (!stalls.empty()) {
      for (Response& r : table_.fail_stalled(stalls)) stall_failures_.push_back(std::move(r));
      report_due_ = report_failing_ = true;  // logged with the reports, this cycle
      report_stalls_ = std::move(stalls);
    }
  }
  const bool need_slow = !to_send_.empty() || !stall_failures_.empty();
  // Note [An AND as long as the cache in use]
  cache_words_ = (cache_.high_water() + 63) / 64;

  std::vector<uint64_t>& bits = bits_;
  build_bits(shutdown, need_slow, &bits);
  if (report_due_) bits[0] &= ~kFlagReport;  // inverted, like every flag
  if (rank_ == 0 && !announcement_.empty()) bits[0] &= ~kFlagAnnounce;
  // Note [Data rides with the AND]: only what the fast path alone decides.
  bool packed = false;
  if (packer_ && carried != nullptr && !need_slow && !shutdown && invalid_.empty() && !joined_ &&
      !report_due_ && (rank_ != 0 || announcement_.empty()) && !waiting_.empty() &&
      control_.carry_capacity(bits.size()) > 0) {
    ahead_.clear();
    for (const auto& [bit, w] : waiting_) ahead_.push_back(&cache_.at(bit));
    const bool in_line = ahead_.size() == 1 && rides_in_line(ahead_[0]->params, bits.size());
    packed = packer_(ahead_, control_.carry_slot(bits.size(), in_line),
                     control_.carry_capacity(bits.size(), in_line));
    if (packed) bits[0] &= ~(in_line ? kFlagCarried | kFlagCarriedInLine : kFlagCarried);
  }
  KOLO_RETURN_IF_ERROR(control_.ring_and(cycle_, &bits));
  if (packed) *carried = control_.unanimous();
  return absorb(bits, ready, stop);
}

bool Negotiator::rides_in_line(const TensorParams& params, size_t words) const {
  // An allreduce's part is its tensor, the same size on every rank; a cycle
  // with it alone waiting packs the same bytes as a call alone, so both ask for
  // the same slot.
  if (params.collective != Collective::kAllreduce) return false;
  const size_t room = control_.carry_capacity(words, /*in_line=*/true);
  return room > 0 && params.bytes() <= room;
}

bool Negotiator::alone(const Request& request, uint32_t* bit) const {
  if (!to_send_.empty() || !invalid_.empty() || !waiting_.empty() || !stall_failures_.empty() ||
      report_due_ || joined_ || recording_ || someone_recording_ || !announcement_.empty())
    return false;
  if (rank_ == 0 && config_.stall_shutdown_seconds > 0 && table_.pending() > 0) return false;
  return is_cacheable(request.params.collective) &&
         cache_.lookup(request, bit) == ResponseCache::Lookup::kHit;
}

Status Negotiator::cycle_alone(const Request& request, uint32_t bit, Clock::time_point since,
                               const AlonePacker& pack, bool* done, std::vector<Response>* ready,
                               bool* stop) {
  *done = false;
  // What build_bits() makes with `bit` alone waiting and nothing else to say.
  cache_words_ = (cache_.high_water() + 63) / 64;  // Note [An AND as long as the cache in use]
  std::vector<uint64_t>& bits = bits_;
  empty_bits(/*shutdown=*/false, /*slow_path=*/false, &bits);
  mark_ready(bit, &bits);
  const bool in_line = rides_in_line(request.params, bits.size());
  const size_t capacity = control_.carry_capacity(bits.size(), in_line);
  const bool packed = capacity > 0 && pack(control_.carry_slot(bits.size(), in_line), capacity);
  if (packed) bits[0] &= ~(in_line ? kFlagCarried | kFlagCarriedInLine : kFlagCarried);
  Status anded = control_.ring_and(cycle_, &bits);
  // Every rank's vector equal to this one: the AND is this vector, and every
  // rank packed the same bucket (Note [A call alone]).
  if (anded.ok() && packed && control_.unanimous()) {
    cache_.touch(bit);
    someone_recording_ = false;
    ++cycle_;
    *done = true;
    return Status::OK();
  }
  wait_on(bit, request, since == Clock::time_point{} ? Clock::now() : since);  // as add() would have
  if (!anded.ok()) {
    ready->clear();
    return anded;
  }
  Status s = absorb(bits, ready, stop);
  if (!s.ok()) ready->clear();
  return s;
}

Status Negotiator::absorb(const std::vector<uint64_t>& bits, std::vector<Response>* ready,
                          bool* stop) {
  size_t n = 0;
  invalid_.clear();
  const uint64_t flags = ~bits[0];
  // The lengths' OR: a rank whose length differs from another's sees more bits.
  if ((flags >> kWordsShift) != cache_words()) {
    return internal_error("the ranks' negotiation vectors differ in length (this rank's " +
                          std::to_string(cache_words()) + " cache words, the OR of all " +
                          std::to_string(flags >> kWordsShift) + ")");
  }
  *stop = (flags & kFlagShutdown) != 0;
  someone_recording_ = (flags & kFlagTimeline) != 0;

  // Ready everywhere, in bit order; then invalid somewhere: evicted everywhere.
  // Note [A cached operation's storage is reused]: the last cycle's responses
  // are overwritten in place, not destroyed and copied anew.
  // Word by word, set bits only (Note [Reading the AND a word at a time]).
  for (size_t w = 0; w < cache_words(); ++w) {
    for (uint64_t set = bits[ready_word(64 * w)] & ~bits[held_word(64 * w)]; set != 0;
         set &= set - 1) {
      const auto bit = static_cast<uint32_t>(64 * w + static_cast<size_t>(__builtin_ctzll(set)));
      KOLO_CHECK(cache_.occupied(bit));
      if (n < ready->size())
        (*ready)[n] = cache_.at(bit);
      else
        ready->push_back(cache_.at(bit));
      ++n;
      cache_.touch(bit);
      stop_waiting(bit);
    }
  }
  ready->resize(n);
  for (size_t w = 0; w < cache_words(); ++w) {
    for (uint64_t set = ~bits[invalid_word(64 * w)]; set != 0; set &= set - 1) {
      const size_t bit = 64 * w + static_cast<size_t>(__builtin_ctzll(set));
      if (bit < cache_.capacity()) evict(static_cast<uint32_t>(bit));
    }
  }

  if (flags & kFlagSlowPath) KOLO_RETURN_IF_ERROR(slow_path(ready));
  if (flags & kFlagReport) KOLO_RETURN_IF_ERROR(gather_report());
  if (flags & kFlagAnnounce) {
    received_ = rank_ == 0 ? std::move(announcement_) : std::string();
    announcement_.clear();
    KOLO_RETURN_IF_ERROR(control_.broadcast(&received_, 0));
    announced_ = true;
  }
  ++cycle_;
  return Status::OK();
}

Status Negotiator::slow_path(std::vector<Response>* ready) {
  std::vector<std::string> gathered;
  KOLO_RETURN_IF_ERROR(control_.gather(encode_requests(to_send_), &gathered, 0));
  for (const Request& r : to_send_)
    if (has_per_rank_sizes(r.params.collective)) sent_own_[r.name] = r.params;
  to_send_.clear();

  std::string encoded;
  if (rank_ == 0) {
    std::vector<Response> responses = std::move(stall_failures_);
    stall_failures_.clear();
    const auto now = Clock::now();
    for (int r = 0; r < size_; ++r) {
      std::vector<Request> requests;
      KOLO_RETURN_IF_ERROR(decode_requests(gathered[r], &requests));
      for (Request& req : requests) {
        for (Response& resp : table_.add(r, std::move(req), now)) responses.push_back(std::move(resp));
      }
    }
    encoded = encode_responses(responses);
  }
  KOLO_RETURN_IF_ERROR(control_.broadcast(&encoded, 0));
  std::vector<Response> responses;
  KOLO_RETURN_IF_ERROR(decode_responses(encoded, &responses));
  for (Response& resp : responses) {
    if (resp.params.collective == Collective::kJoin) joined_ = false;
    auto own = sent_own_.find(resp.name);
    if (resp.code == Code::kOk && is_cacheable(resp.params.collective)) {
      std::optional<uint32_t> evicted;
      const bool per_rank = has_per_rank_sizes(resp.params.collective);
      cache_.put(resp, &evicted,
                 per_rank && own != sent_own_.end() ? &own->second : nullptr);
      // put() already dropped the victim (and may have reused its bit).
      if (evicted) requeue_waiting(*evicted);
    }
    if (own != sent_own_.end()) sent_own_.erase(own);
    ready->push_back(std::move(resp));
  }
  return Status::OK();
}

void Negotiator::warn_stalls(Clock::time_point now) {
  if (rank_ != 0 || config_.stall_check_seconds <= 0 || table_.pending() == 0) return;
  if (seconds(now - last_stall_warning_) < config_.stall_check_seconds) return;
  if (report_due_ || table_.stalls(now, config_.stall_check_seconds).empty()) return;
  last_stall_warning_ = now;
  report_due_ = true;
}

Status Negotiator::gather_report() {
  const RankReport mine = reporter_ ? reporter_() : RankReport{};
  std::vector<std::string> gathered;
  KOLO_RETURN_IF_ERROR(control_.gather(encode_rank_report(mine), &gathered, 0));
  report_made_ = true;
  if (rank_ != 0) return Status::OK();
  std::vector<RankReport> reports(size_);
  for (int r = 0; r < size_; ++r)
    KOLO_RETURN_IF_ERROR(decode_rank_report(gathered[r], &reports[r]));
  std::vector<MessageTable::Stall> stalls = std::move(report_stalls_);
  report_stalls_.clear();
  if (report_failing_) {
    KOLO_LOG(kError) << describe_stalls(stalls, reports)
                     << " — failing them (KOLO_STALL_SHUTDOWN_TIME_SECONDS)";
  } else {
    // Only what still waits: a name may have completed since the report was asked for.
    stalls = table_.stalls(Clock::now(), config_.stall_check_seconds);
    if (!stalls.empty()) KOLO_LOG(kWarning) << describe_stalls(stalls, reports);
  }
  report_due_ = report_failing_ = false;
  return Status::OK();
}

}  // namespace kolo::core
