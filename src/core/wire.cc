#include "core/wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kolo/kolo.h"

namespace kolo::core {
namespace {

constexpr uint32_t kMagic = 0x4f4c4f4b;  // "KOLO" read as little-endian u32
constexpr uint8_t kVersion = 6;  // 2: send_rows, member_counts; 3: shapes; 4: member rows; 5: deterministic; 6: into
constexpr uint8_t kKindRequests = 1;
constexpr uint8_t kKindResponses = 2;
constexpr uint8_t kKindRankReport = 3;
constexpr uint8_t kKindInitReport = 4;
// Knob names and values are short; a fingerprint has tens of entries.
constexpr uint32_t kMaxEntryLength = 4096;
// Messages may be long (they list ranks), but not unboundedly.
constexpr uint32_t kMaxMessageLength = 1 << 20;

class Writer {
 public:
  template <typename T>
  void put(T v) {
    char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    out_.append(raw, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void put_values(const std::vector<int64_t>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) put<int64_t>(x);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}

  template <typename T>
  bool get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_string(std::string* s, uint32_t max_length) {
    uint32_t n;
    if (!get(&n) || n > max_length || in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool get_values(std::vector<int64_t>* v) {
    uint32_t n;
    if (!get(&n) || n > remaining() / sizeof(int64_t)) return false;
    v->resize(n);
    for (auto& x : *v)
      if (!get(&x)) return false;
    return true;
  }
  bool at_end() const { return pos_ == in_.size(); }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

void write_header(Writer* w, uint8_t kind, size_t count) {
  w->put<uint32_t>(kMagic);
  w->put<uint8_t>(kVersion);
  w->put<uint8_t>(kind);
  w->put<uint32_t>(static_cast<uint32_t>(count));
}

void write_request(Writer* w, const std::string& name, const TensorParams& p) {
  w->put_string(name);
  w->put<uint8_t>(static_cast<uint8_t>(p.collective));
  w->put<int32_t>(static_cast<int32_t>(p.dtype));
  w->put<int32_t>(static_cast<int32_t>(p.op));
  w->put<int32_t>(static_cast<int32_t>(p.device_kind));
  w->put<int64_t>(p.count);
  w->put<double>(p.prescale);
  w->put<double>(p.postscale);
  w->put<int32_t>(p.root);
  w->put<int64_t>(p.row_count);
  w->put_values(p.send_rows);
  w->put_values(p.member_counts);
  w->put<uint64_t>(p.names_hash);
  w->put_values(p.shapes);
  w->put_values(p.member_row_counts);
  w->put<uint8_t>(p.deterministic ? 1 : 0);
  w->put<uint8_t>(p.into ? 1 : 0);
}

Status corrupt(const char* what) {
  return Status(Code::kInternal, std::string("corrupt negotiation message: ") + what);
}

Status read_header(Reader* r, uint8_t want_kind, uint32_t* count) {
  uint32_t magic;
  uint8_t version, kind;
  if (!r->get(&magic) || !r->get(&version) || !r->get(&kind) || !r->get(count))
    return corrupt("truncated header");
  if (magic != kMagic) return corrupt("bad magic");
  if (version != kVersion) return corrupt("unknown version");
  if (kind != want_kind) return corrupt("unexpected message kind");
  return Status::OK();
}

Status read_request(Reader* r, std::string* name, TensorParams* p) {
  uint8_t collective, deterministic, into;
  int32_t dtype, op, device;
  if (!r->get_string(name, KOLO_MAX_NAME_LENGTH)) return corrupt("bad name");
  if (!r->get(&collective) || !r->get(&dtype) || !r->get(&op) || !r->get(&device) ||
      !r->get(&p->count) || !r->get(&p->prescale) || !r->get(&p->postscale) ||
      !r->get(&p->root) || !r->get(&p->row_count) || !r->get_values(&p->send_rows) ||
      !r->get_values(&p->member_counts) || !r->get(&p->names_hash) ||
      !r->get_values(&p->shapes) || !r->get_values(&p->member_row_counts) ||
      !r->get(&deterministic) || !r->get(&into))
    return corrupt("truncated item");
  if (deterministic > 1) return corrupt("bad deterministic flag");
  if (into > 1) return corrupt("bad into flag");
  p->deterministic = deterministic != 0;
  p->into = into != 0;
  if (collective >= kNumCollectives) return corrupt("bad collective");
  p->collective = static_cast<Collective>(collective);
  p->dtype = static_cast<DataType>(dtype);
  p->op = static_cast<ReduceOp>(op);
  p->device_kind = static_cast<DeviceKind>(device);
  if (!is_valid(p->dtype)) return corrupt("bad dtype");
  if (!is_valid(p->op)) return corrupt("bad op");
  if (!is_valid(p->device_kind)) return corrupt("bad device");
  if (p->count < 0) return corrupt("negative count");
  if (p->row_count < 1) return corrupt("row size below 1");
  std::vector<std::vector<int64_t>> dims;
  if (!split_shapes(p->shapes, &dims)) return corrupt("bad shape");
  for (int64_t rc : p->member_row_counts)
    if (rc < 1) return corrupt("member row size below 1");
  for (const auto& shape : dims)
    for (int64_t d : shape)
      if (d < 0) return corrupt("negative dimension");
  return Status::OK();
}

// Each item needs at least this many bytes, which bounds a claimed item count.
constexpr size_t kMinItemBytes = 4 + 1 + 4 + 4 + 4 + 8 + 8 + 8 + 4 + 8 + 4 + 4 + 8 + 4 + 4;

}  // namespace

std::string encode_requests(const std::vector<Request>& requests) {
  Writer w;
  write_header(&w, kKindRequests, requests.size());
  for (const Request& r : requests) write_request(&w, r.name, r.params);
  return w.take();
}

std::string encode_responses(const std::vector<Response>& responses) {
  Writer w;
  write_header(&w, kKindResponses, responses.size());
  for (const Response& r : responses) {
    write_request(&w, r.name, r.params);
    w.put<int32_t>(static_cast<int32_t>(r.code));
    w.put_string(r.message);
    w.put_values(r.rows_per_rank);
    w.put_values(r.rows_matrix);
    w.put<int32_t>(r.last_joined);
  }
  return w.take();
}

Status decode_requests(const std::string& bytes, std::vector<Request>* requests) {
  Reader r(bytes);
  uint32_t count;
  KOLO_RETURN_IF_ERROR(read_header(&r, kKindRequests, &count));
  if (count > r.remaining() / kMinItemBytes) return corrupt("item count exceeds message");
  std::vector<Request> out(count);
  for (Request& req : out) KOLO_RETURN_IF_ERROR(read_request(&r, &req.name, &req.params));
  if (!r.at_end()) return corrupt("trailing bytes");
  *requests = std::move(out);
  return Status::OK();
}

Status decode_responses(const std::string& bytes, std::vector<Response>* responses) {
  Reader r(bytes);
  uint32_t count;
  KOLO_RETURN_IF_ERROR(read_header(&r, kKindResponses, &count));
  if (count > r.remaining() / kMinItemBytes) return corrupt("item count exceeds message");
  std::vector<Response> out(count);
  for (Response& resp : out) {
    KOLO_RETURN_IF_ERROR(read_request(&r, &resp.name, &resp.params));
    int32_t code;
    if (!r.get(&code) || !r.get_string(&resp.message, kMaxMessageLength) ||
        !r.get_values(&resp.rows_per_rank) || !r.get_values(&resp.rows_matrix) ||
        !r.get(&resp.last_joined))
      return corrupt("truncated response");
    if (code < 0 || code > static_cast<int32_t>(Code::kLast)) return corrupt("bad code");
    resp.code = static_cast<Code>(code);
  }
  if (!r.at_end()) return corrupt("trailing bytes");
  *responses = std::move(out);
  return Status::OK();
}

std::string encode_rank_report(const RankReport& report) {
  Writer w;
  const size_t listed = std::min(report.pending.size(), kMaxReportedNames);
  write_header(&w, kKindRankReport, listed);
  w.put<double>(report.idle_seconds);
  w.put<uint32_t>(report.pending_total);
  for (size_t i = 0; i < listed; ++i) w.put_string(report.pending[i]);
  return w.take();
}

Status decode_rank_report(const std::string& bytes, RankReport* report) {
  Reader r(bytes);
  uint32_t count;
  KOLO_RETURN_IF_ERROR(read_header(&r, kKindRankReport, &count));
  RankReport out;
  if (!r.get(&out.idle_seconds) || !r.get(&out.pending_total)) return corrupt("truncated report");
  if (!std::isfinite(out.idle_seconds)) return corrupt("bad idle time");
  if (count > kMaxReportedNames || count > r.remaining() / 4) return corrupt("too many names");
  out.pending.resize(count);
  for (std::string& name : out.pending)
    if (!r.get_string(&name, KOLO_MAX_NAME_LENGTH)) return corrupt("bad name");
  if (!r.at_end()) return corrupt("trailing bytes");
  *report = std::move(out);
  return Status::OK();
}

std::string encode_init_report(const Status& status, const std::vector<KnobValue>& entries) {
  Writer w;
  write_header(&w, kKindInitReport, 0);
  w.put<int32_t>(static_cast<int32_t>(status.code()));
  w.put_string(status.message());
  w.put<uint32_t>(static_cast<uint32_t>(entries.size()));
  for (const KnobValue& e : entries) {
    w.put_string(e.name);
    w.put_string(e.value);
  }
  return w.take();
}

Status decode_init_report(const std::string& bytes, Status* status,
                          std::vector<KnobValue>* entries) {
  Reader r(bytes);
  uint32_t items = 0, count = 0;
  int32_t code;
  std::string message;
  KOLO_RETURN_IF_ERROR(read_header(&r, kKindInitReport, &items));
  if (items != 0) return corrupt("init report with items");
  if (!r.get(&code) || !r.get_string(&message, kMaxMessageLength) || !r.get(&count))
    return corrupt("truncated init report");
  if (code < 0 || code > static_cast<int32_t>(Code::kLast)) return corrupt("bad code");
  if (count > r.remaining() / 8) return corrupt("entry count exceeds message");  // two lengths each
  std::vector<KnobValue> out(count);
  for (KnobValue& e : out)
    if (!r.get_string(&e.name, kMaxEntryLength) || !r.get_string(&e.value, kMaxEntryLength))
      return corrupt("truncated entry");
  if (!r.at_end()) return corrupt("trailing bytes");
  *status = Status(static_cast<Code>(code), std::move(message));
  *entries = std::move(out);
  return Status::OK();
}

}  // namespace kolo::core
