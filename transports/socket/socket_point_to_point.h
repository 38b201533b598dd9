// PointToPoint over the socket world's connections (transport/point_to_point.h):
// a thin face over the engine (engine.h), which says how messages travel.
//
// Contract: one calling thread (the coordinator); every request is waited on
// exactly once; the caller's buffers stay valid until then. Ranks here are the
// plane's (a process set's members are numbered 0..n-1 in `members` order); the
// messages travel on the plane's channel, so a set's never meet the world's.
// A wait spins and yields briefly, then sleeps until the progress thread signals
// (Note [Waiting without spinning]); it ends with KOLO_ERR_RANK_FAILED when a
// peer fails.
#pragma once

#include <memory>
#include <vector>

#include "transport/point_to_point.h"
#include "transports/socket/engine.h"

namespace kolo::socket {

class SocketPointToPoint : public transport::PointToPoint {
 public:
  SocketPointToPoint(std::shared_ptr<Engine> engine, uint32_t channel, std::vector<int> members,
                     int rank)
      : engine_(std::move(engine)), channel_(channel), members_(std::move(members)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }

  Status isend(int peer, const void* data, size_t bytes, int tag,
               transport::RequestId* id) override;
  Status irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) override;
  Status wait(transport::RequestId id) override { return engine_->wait(id); }
  Status test(transport::RequestId id, bool* done) override { return engine_->test(id, done); }

 private:
  Status world_rank(int peer, int* out) const;

  std::shared_ptr<Engine> engine_;
  const uint32_t channel_;
  const std::vector<int> members_;
  const int rank_;
};

}  // namespace kolo::socket
