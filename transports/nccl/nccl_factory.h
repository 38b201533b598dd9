// The device transport's maker, the one edge where a build with or without NCCL
// differs: nccl_factory.cc builds NcclTransport; nccl_unavailable.cc, compiled
// instead in a build without CUDA and NCCL, answers Unsupported with the reason.
// No CUDA or NCCL type appears here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transport/device.h"
#include "transport/factory.h"
#include "transport/transport.h"

namespace kolo::nccl {

// `control` outlives the transport; `fusion_bytes` sizes its device fusion buffer;
// `cross`, when set, makes every device allreduce hierarchical (Note [Hierarchical
// on GPUs] in nccl_transport.h). *support is the transport's DeviceSupport face.
Status make_nccl_transport(transport::ControlPlane& control, size_t fusion_bytes,
                           std::shared_ptr<transport::CrossEngine> cross,
                           std::unique_ptr<transport::Transport>* out,
                           transport::DeviceSupport** support);

// Whether this build has the device transport; *about says what it was built
// with, or why it was not (the registry's known_transports() and kolo-info).
bool device_transport_built(std::string* about);

}  // namespace kolo::nccl
