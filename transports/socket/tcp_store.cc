// The store's client (tcp_store.h).
#include <unistd.h>

#include "transports/socket/tcp_store.h"

#include "common/check.h"

namespace kolo::socket {

Status TcpStore::connect(const Endpoint& server, std::string token, int32_t rank,
                         uint64_t generation, std::chrono::milliseconds timeout,
                         std::unique_ptr<TcpStore>* out) {
  if (token.size() > kMaxTokenBytes)
    return invalid_argument("the job token is " + std::to_string(token.size()) +
                            " bytes; at most " + std::to_string(kMaxTokenBytes));
  std::unique_ptr<TcpStore> store(new TcpStore(server, std::move(token), rank, generation, timeout));
  KOLO_RETURN_IF_ERROR_AS_IS(store->open(Clock::now() + timeout));
  *out = std::move(store);
  return Status::OK();
}

Status TcpStore::open(Clock::time_point deadline) {
  fd_.reset();
  Fd fd;
  KOLO_RETURN_IF_ERROR_AS_IS(connect_to(server_, deadline, "the store", &fd));
  Hello hello;
  hello.role = Role::kStore;
  hello.token = token_;
  hello.pid = static_cast<int32_t>(getpid());
  hello.host = host_name();
  const std::string what = describe();
  KOLO_RETURN_IF_ERROR_AS_IS(
      write_all(fd.get(), encode_frame(FrameType::kHello, rank_, generation_, encode_hello(hello)),
                deadline, what));
  Frame frame;
  Status s = read_frame(fd.get(), deadline, what, &frame, max_payload(FrameType::kHello));
  Hello back;
  if (s.ok() && frame.header.type != FrameType::kHello)
    s = transport_error(what + " answered the hello with a " +
                        frame_type_name(frame.header.type) + " frame");
  if (s.ok()) s = decode_hello(frame.payload, &back);
  if (s.ok() && (back.role != Role::kStore || !same_token(back.token, token_)))
    s = transport_error(what + " answered with another job token: it serves another job");
  if (!s.ok() && s.code() != Code::kTimeout)
    return Status(Code::kTransport,
                  what + " did not answer kolo's handshake (" + s.message() +
                      "): it refused this rank's job token (KOLO_JOB_TOKEN differs), or it is "
                      "not kolo's store (torchrun's own store holds MASTER_PORT; kolo's is at "
                      "MASTER_PORT + 1 or KOLO_STORE_PORT)");
  KOLO_RETURN_IF_ERROR_AS_IS(s);
  KOLO_RETURN_IF_ERROR(local_endpoint(fd.get(), &local_));
  fd_ = std::move(fd);
  return Status::OK();
}

Status TcpStore::call(const StoreRequest& q, Clock::time_point deadline, StoreReply* reply) {
  Status s;
  if (!fd_.valid()) s = open(deadline);
  const std::string what = describe();
  if (s.ok())
    s = write_all(fd_.get(), encode_frame(FrameType::kStoreRequest, rank_, generation_,
                                          encode_store_request(q)),
                  deadline, what);
  Frame frame;
  if (s.ok()) s = read_frame(fd_.get(), deadline, what, &frame, max_payload(FrameType::kStoreReply));
  if (s.ok() && frame.header.type != FrameType::kStoreReply)
    s = transport_error(what + " answered with a " + frame_type_name(frame.header.type) + " frame");
  if (s.ok()) s = decode_store_reply(q.op, frame.payload, reply);
  if (s.ok() && reply->status == StoreStatus::kError)
    s = transport_error(what + ": " + reply->value);
  if (!s.ok()) {
    // The connection may still carry the answer to this call: start afresh next time.
    fd_.reset();
    return Status(s.code(), std::string(store_op_name(q.op)) + " of " + list_keys(q.keys) +
                                ": " + s.message());
  }
  return Status::OK();
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  StoreRequest q;
  q.op = StoreOp::kSet;
  q.keys = {key};
  q.value = value;
  StoreReply r;
  return call(q, Clock::now() + timeout_, &r);
}

Status TcpStore::try_get(const std::string& key, std::string* value, bool* found) {
  StoreRequest q;
  q.op = StoreOp::kGet;
  q.keys = {key};
  StoreReply r;
  KOLO_RETURN_IF_ERROR_AS_IS(call(q, Clock::now() + timeout_, &r));
  *found = r.status == StoreStatus::kOk;
  if (*found) *value = std::move(r.value);
  return Status::OK();
}

Status TcpStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  StoreRequest q;
  q.op = StoreOp::kWait;
  q.keys = keys;
  StoreReply r;
  const auto start = Clock::now();
  Status s = call(q, start + timeout, &r);
  if (s.code() == Code::kTimeout)
    return Status(Code::kTimeout, describe() + ": waited " + seconds_text(Clock::now() - start) +
                                      " for " + list_keys(keys));
  return s;
}

Status TcpStore::add(const std::string& key, int64_t delta, int64_t* value) {
  StoreRequest q;
  q.op = StoreOp::kAdd;
  q.keys = {key};
  q.delta = delta;
  StoreReply r;
  KOLO_RETURN_IF_ERROR_AS_IS(call(q, Clock::now() + timeout_, &r));
  *value = r.number;
  return Status::OK();
}

Status TcpStore::compare_and_set(const std::string& key, const std::string& expected,
                                 const std::string& desired, std::string* current) {
  StoreRequest q;
  q.op = StoreOp::kCompareSet;
  q.keys = {key};
  q.expected = expected;
  q.value = desired;
  StoreReply r;
  KOLO_RETURN_IF_ERROR_AS_IS(call(q, Clock::now() + timeout_, &r));
  *current = std::move(r.value);
  return Status::OK();
}

Status TcpStore::delete_prefix(const std::string& prefix, int64_t* removed) {
  StoreRequest q;
  q.op = StoreOp::kDeletePrefix;
  q.keys = {prefix};
  StoreReply r;
  KOLO_RETURN_IF_ERROR_AS_IS(call(q, Clock::now() + timeout_, &r));
  *removed = r.number;
  return Status::OK();
}

}  // namespace kolo::socket
