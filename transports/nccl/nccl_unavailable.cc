// The device transport's maker in a build without CUDA and NCCL (see
// nccl_factory.h): it says why.
#include "kolo_build_config.h"
#include "transports/nccl/nccl_factory.h"

namespace kolo::nccl {

Status make_nccl_transport(transport::ControlPlane&, size_t, std::shared_ptr<transport::CrossEngine>,
                           std::unique_ptr<transport::Transport>*, transport::DeviceSupport** support) {
  *support = nullptr;
  return unsupported(std::string("nccl is not in this build: ") + KOLO_NCCL_REASON);
}

}  // namespace kolo::nccl
