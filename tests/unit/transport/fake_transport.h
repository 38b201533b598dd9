// A fake collective transport for the registry's tests: a name and the verdict it
// gives every bucket; it never reduces anything.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "transport/transport.h"

namespace kolo::transport {

// Says `verdict` to every bucket; never reduces anything.
class FakeTransport : public Transport {
 public:
  explicit FakeTransport(std::string name, Status verdict = Status::OK())
      : name_(std::move(name)), verdict_(std::move(verdict)) {}
  const char* name() const override { return name_.c_str(); }
  // What the real transport of that name declares (the selector's tests read
  // the table against these).
  Capabilities capabilities() const override {
    Capabilities c;
    c.collectives = kAllCollectives;
    c.host = true;
    if (name_ == "nccl") {
      c.host = false;
      c.device = true;
    } else if (name_ == "adasum") {
      c.collectives = 0;
      c.adasum = true;
    }
    c.deterministic = name_ == "ring" || name_ == "shm";
    return c;
  }
  Status supports(const Bucket&) const override { return verdict_; }
  std::unique_ptr<Work> allreduce(const Bucket&) override {
    return std::make_unique<CompletedWork>(internal_error("fake"));
  }

 private:
  std::string name_;
  Status verdict_;
};

}  // namespace kolo::transport
