// Transport: the collective seam. A transport reduces one bucket at a time.
//
// Contract:
// - Called only by the coordinator thread, for buckets in the same sequence order
//   on every rank; a transport never sees tensor names, queues, handles or options.
// - supports(bucket) answers the same on every rank for the same bucket: OK, or
//   Unsupported with a reason that the coordinator logs when it picks another.
// - The bucket's memory is owned by the coordinator and stays valid until the
//   returned Work completes.
// - A transport converts its native errors (MPI error strings, ncclResult_t, ...)
//   into Status at its boundary. An error fails the bucket's tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace kolo::transport {

// One bucket, as a transport sees it: `count` elements at `input`, reduced into
// `output` on every rank (input == output: in place).
//
// For CPU buckets the coordinator has already applied the scale factors and turned
// AVERAGE into SUM (it divides afterwards), so a CPU transport sees op in {SUM,
// MIN, MAX, PRODUCT} and prescale == postscale == 1. Device transports may be
// handed the factors to fuse them into their own kernels.
struct BucketView {
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Device device;
  double prescale = 1.0;
  double postscale = 1.0;
  uint64_t sequence = 0;  // the bucket's index in the coordinator's global order

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
};

// The completion of an operation a transport started.
class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking: true once complete (then wait() returns at once).
  virtual bool test() = 0;
  // Blocks until complete; returns the operation's status.
  virtual Status wait() = 0;
};

// A Work that is already complete (synchronous transports).
class CompletedWork : public Work {
 public:
  explicit CompletedWork(Status status) : status_(std::move(status)) {}
  bool test() override { return true; }
  Status wait() override { return status_; }

 private:
  Status status_;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The name KOLO_TRANSPORT selects it by ("mpi", "ring", ...).
  virtual const char* name() const = 0;

  virtual Status supports(const BucketView& bucket) const = 0;

  virtual std::unique_ptr<Work> allreduce(const BucketView& bucket) = 0;
};

}  // namespace kolo::transport
