// DeviceSupport: what the core and the C API need from a device transport (NCCL)
// beyond reducing buckets, without including a CUDA header.
//
// The model (Note [Device streams]): a device tensor is ready after the work its
// caller queued on the tensor's stream up to the moment of submission. kolo
// records that point as an event in the submitting thread (record_ready), and its
// own stream waits for the event before touching the tensor; the CPU never blocks
// on the producer. Each device operation ends with an event of its own (a Work's
// done_event), which a caller can make its next kernel wait for (stream_wait).
#pragma once

#include <cstddef>
#include <memory>

#include "common/dtype.h"
#include "common/status.h"

namespace kolo::transport {

// An opaque point in a device stream's work (a CUDA event). Immutable once made;
// shared between the tensor entry, the transport and the handle.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};

class DeviceSupport {
 public:
  virtual ~DeviceSupport() = default;

  // Checks that `device` names a usable device and replaces index -1 with this
  // rank's default device (local_rank modulo the visible devices; the ordinal is
  // within CUDA_VISIBLE_DEVICES). Any thread.
  virtual Status resolve(Device* device) = 0;

  // Records on device.stream (null: the legacy default stream) the point after
  // which data submitted now is ready. Any thread; called while submitting.
  virtual Status record_ready(const Device& device, std::shared_ptr<DeviceEvent>* ready) = 0;

  // Makes `stream` (a cudaStream_t; null: the legacy default stream) wait for
  // `event` without blocking the CPU. Any thread.
  virtual Status stream_wait(const DeviceEvent& event, void* stream) = 0;

  // `bytes` of device memory on `device` for an output kolo allocates (allgather,
  // alltoall); freed when the last copy of `out` goes, on any thread. Coordinator.
  virtual Status allocate(const Device& device, size_t bytes, std::shared_ptr<char>* out) = 0;

  // As allocate(), filled with zeros before any later work on kolo's stream: a
  // joined rank's contribution to a device bucket (it also takes the result).
  // Coordinator.
  virtual Status allocate_zeros(const Device& device, size_t bytes, std::shared_ptr<char>* out) = 0;
};

// Note [Device streams]
// Horovod's GPU path makes its background thread wait on an event the framework
// recorded, then copies on a private stream. kolo does the same split: the caller's
// stream is never synchronised by kolo, kolo's stream (one per device, non-blocking,
// high priority) waits for each tensor's ready event, runs the pack kernel, the
// NCCL call and the unpack kernel in order, and records a done event. Stream order
// is what makes the persistent device fusion buffer safe to reuse: the next
// bucket's pack runs after the previous bucket's unpack on the same stream. The
// handle completes when the done event has happened (polled by the coordinator,
// which a host callback on kolo's stream wakes), so kolo_wait returning means the
// results can be read from any stream or from the host.

}  // namespace kolo::transport
