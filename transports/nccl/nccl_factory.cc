#include "transports/nccl/nccl_factory.h"

#include "kolo_build_config.h"
#include "transports/nccl/nccl_transport.h"

namespace kolo::nccl {

Status make_nccl_transport(transport::ControlPlane& control, size_t fusion_bytes,
                           std::shared_ptr<transport::CrossEngine> cross,
                           std::unique_ptr<transport::Transport>* out,
                           transport::DeviceSupport** support) {
  auto t = std::make_unique<NcclTransport>(control, fusion_bytes, std::move(cross));
  *support = t.get();
  *out = std::move(t);
  return Status::OK();
}

bool device_transport_built(std::string* about) {
  *about = KOLO_NCCL_REASON;
  return true;
}

}  // namespace kolo::nccl
