// LockedP2P: a loopback rank's verbs shared by several threads of that rank
// (as process sets' coordinators would share one world's verbs), for the tests
// that run groups at once over one PointToPoint. Every call takes a lock; wait()
// polls test() with the lock released in between, so one thread's wait never
// blocks another's progress, and gives up with an error after `deadline` (a
// test that goes wrong fails instead of hanging).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "transport/point_to_point.h"

namespace kolo::testing {

class LockedP2P : public transport::PointToPoint {
 public:
  explicit LockedP2P(transport::PointToPoint& inner,
                     std::chrono::seconds deadline = std::chrono::seconds(30))
      : inner_(inner), deadline_(deadline) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status isend(int peer, const void* data, size_t bytes, int tag,
               transport::RequestId* id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner_.isend(peer, data, bytes, tag, id);
  }
  Status irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner_.irecv(peer, data, bytes, tag, id);
  }
  Status test(transport::RequestId id, bool* done) override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner_.test(id, done);
  }
  Status wait(transport::RequestId id) override {
    const auto give_up = std::chrono::steady_clock::now() + deadline_;
    for (int polls = 0;; ++polls) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        bool done = false;
        Status s = inner_.test(id, &done);
        if (!s.ok()) return s;
        if (done) return inner_.wait(id);
      }
      if (std::chrono::steady_clock::now() > give_up)
        return transport_error("LockedP2P: request " + std::to_string(id) + " still open after " +
                               std::to_string(deadline_.count()) + " s");
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  transport::PointToPoint& inner_;
  std::chrono::seconds deadline_;
  std::mutex mu_;
};

}  // namespace kolo::testing
