#include "transports/nccl/nccl_info.h"

#include <nccl.h>

namespace kolo::nccl {
namespace {

// NCCL encodes versions as major*10000 + minor*100 + patch since 2.9, and as
// major*1000 + minor*100 + patch before.
std::string decode(int code) {
  const bool new_scheme = code >= 20900;
  const int major = new_scheme ? code / 10000 : code / 1000;
  const int minor = new_scheme ? code % 10000 / 100 : code % 1000 / 100;
  const int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

std::string library_version() {
  int code = 0;
  ncclResult_t result = ncclGetVersion(&code);
  if (result != ncclSuccess) {
    return std::string("unknown (ncclGetVersion: ") + ncclGetErrorString(result) + ")";
  }
  return decode(code);
}

std::string header_version() { return decode(NCCL_VERSION_CODE); }

}  // namespace kolo::nccl
