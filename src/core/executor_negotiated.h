// NegotiatedFamily: the collectives that end in the negotiation and move no data
// here — a barrier (the cycle that made it ready on every rank was the barrier)
// and a join (its handle learns the last rank to join: Note [Join] in
// negotiator.h). Coordinator thread only, through the Executor.
#pragma once

#include "core/executor_context.h"

namespace kolo::core {

class NegotiatedFamily : public Family {
 public:
  Status start(Batch& batch, std::unique_ptr<transport::Work>* work) override {
    switch (batch.params->collective) {
      case Collective::kBarrier: return Status::OK();
      case Collective::kJoin:
        batch.entries[0]->handle->last_joined = batch.responses[0]->last_joined;
        return Status::OK();
      default: return internal_error("NegotiatedFamily: not a barrier or a join");
    }
  }
};

}  // namespace kolo::core
