// Requests: the outstanding point-to-point requests of one algorithm call, on
// one tag, so that every request is waited on exactly once (PointToPoint's
// contract) — also when the call fails half-way: the destructor drains what is
// left, so no buffer is touched after the call returns.
//
// Used by the coordinator thread inside one algorithm call; not copyable.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

#include "common/check.h"
#include "transport/point_to_point.h"

namespace kolo::algorithms {

class Requests {
 public:
  Requests(transport::PointToPoint& p2p, int tag) : p2p_(p2p), tag_(tag) {}
  ~Requests() {
    for (transport::RequestId id : ids_) p2p_.wait(id).ignore();
  }
  Requests(const Requests&) = delete;
  Requests& operator=(const Requests&) = delete;

  Status send(int peer, const void* data, size_t bytes, transport::RequestId* id = nullptr) {
    transport::RequestId r = 0;
    KOLO_RETURN_IF_ERROR(p2p_.isend(peer, data, bytes, tag_, &r));
    ids_.push_back(r);
    if (id) *id = r;
    return Status::OK();
  }

  Status recv(int peer, void* data, size_t bytes, transport::RequestId* id = nullptr) {
    transport::RequestId r = 0;
    KOLO_RETURN_IF_ERROR(p2p_.irecv(peer, data, bytes, tag_, &r));
    ids_.push_back(r);
    if (id) *id = r;
    return Status::OK();
  }

  // Waits for one request this object posted and has not waited for yet. (Found
  // from the back: the algorithms wait mostly for recent requests.)
  Status wait(transport::RequestId id) {
    auto it = std::find(ids_.rbegin(), ids_.rend(), id);
    KOLO_CHECK(it != ids_.rend());
    ids_.erase(std::next(it).base());
    return p2p_.wait(id);
  }

  Status wait_all() {
    while (!ids_.empty()) {
      const transport::RequestId id = ids_.back();
      ids_.pop_back();
      KOLO_RETURN_IF_ERROR(p2p_.wait(id));
    }
    return Status::OK();
  }

 private:
  transport::PointToPoint& p2p_;
  int tag_;
  std::vector<transport::RequestId> ids_;
};

}  // namespace kolo::algorithms
