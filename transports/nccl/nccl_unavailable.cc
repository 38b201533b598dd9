// The NCCL edge in a build without CUDA and NCCL (see nccl_factory.h): the device
// transport's maker and device_transport_built say why there is none, and the
// version queries have nothing to report.
#include "kolo_build_config.h"
#include "transports/nccl/nccl_factory.h"
#include "transports/nccl/nccl_info.h"

namespace kolo::nccl {

Status make_nccl_transport(transport::ControlPlane&, size_t, std::shared_ptr<transport::CrossEngine>,
                           std::unique_ptr<transport::Transport>*, transport::DeviceSupport** support) {
  *support = nullptr;
  return unsupported(std::string("nccl is not in this build: ") + KOLO_NCCL_REASON);
}

bool device_transport_built(std::string* about) {
  *about = KOLO_NCCL_REASON;
  return false;
}

std::string library_version() { return ""; }
std::string header_version() { return ""; }

}  // namespace kolo::nccl
