// What a rank asks for, and what the negotiation answers.
//
// A Request is one rank's submission of one named tensor; a Response is the
// negotiated verdict for a name, identical on every rank: go ahead with these
// parameters, or fail with this status and message. Both travel through the
// control plane encoded by wire.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace kolo::core {

enum class Collective : uint8_t {
  kAllreduce = 0,
};
constexpr int kNumCollectives = 1;

const char* collective_name(Collective c);

// Everything ranks must agree on for a name. See Note [What ranks must agree on].
struct TensorParams {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  DeviceKind device = DeviceKind::kCpu;
  int64_t count = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = -1;  // rooted collectives only; -1 otherwise

  bool operator==(const TensorParams& o) const {
    return collective == o.collective && dtype == o.dtype && op == o.op &&
           device == o.device && count == o.count && prescale == o.prescale &&
           postscale == o.postscale && root == o.root;
  }
  bool operator!=(const TensorParams& o) const { return !(*this == o); }

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
};

struct Request {
  std::string name;
  TensorParams params;
};

struct Response {
  std::string name;
  TensorParams params;          // the agreed parameters (rank 0's on error)
  Code code = Code::kOk;        // kOk: execute; otherwise complete with this error
  std::string message;          // why, for errors
};

// Note [What ranks must agree on]
// A name is the identity of a tensor across ranks. Everything in TensorParams is
// compared on rank 0 when the last rank's request for the name arrives; any
// difference fails the name on every rank with KOLO_ERR_MISMATCH and a message
// that names the field and the value on each rank. The device *index* is not
// compared (rank 0 may use GPU 0 while rank 1 uses GPU 1); the device kind is.

// Compares the requests for one name (one per rank, in rank order). Returns the
// OK response with requests[0]'s parameters, or a mismatch response whose message
// names the tensor, the first field that differs, and the value on each rank.
Response validate(const std::vector<Request>& per_rank);

}  // namespace kolo::core
