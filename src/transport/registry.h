// The transport registry: which transports kolo knows, which this build has, and
// which one reduces a given bucket.
//
// Selection is a pure function of (preference, bucket, topology, transports on
// offer), so it picks the same transport on every rank. See Note [Auto order].
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transport/transport.h"
#include "transport/world.h"

namespace kolo::transport {

struct TransportInfo {
  std::string name;
  bool built = false;
  std::string reason;  // why not built, or what it is when built
};

// Every transport name kolo knows, with this build's verdict.
const std::vector<TransportInfo>& known_transports();

// "auto" or a name from known_transports(); anything else is an error naming the
// accepted values.
Status validate_preference(const std::string& preference);

// The knobs that shape which transports a world offers and how they are built.
struct BuildOptions {
  size_t fusion_bytes = 0;              // KOLO_FUSION_THRESHOLD: the device fusion buffer
  bool hierarchical_allreduce = false;  // KOLO_HIERARCHICAL_ALLREDUCE: device buckets too
  size_t shm_slot_bytes = 512 << 10;    // the shm window's slot: the largest slice it can take
};

// Builds the transports `topology`'s world offers from `factory`, appends them to
// world->transports in the world's order (mpi, ring, then shm on one node or
// hierarchical on several nodes of equal size, then nccl) and sets world->device.
// See Note [Which transports a world offers]. Collective over the world.
Status build_transports(TransportFactory& factory, const Topology& topology,
                        const BuildOptions& options, World* world);

class Selector {
 public:
  // `offered` are the world's transports (not owned); `preference` is KOLO_TRANSPORT;
  // `prefer_hierarchical` is KOLO_HIERARCHICAL_ALLREDUCE (auto order only).
  Selector(std::vector<Transport*> offered, std::string preference, Topology topology,
           bool prefer_hierarchical = false);

  // Checks that the preference can be served by this world at all (init-time error).
  Status validate() const;

  // The transport for this bucket, or an error if none supports it. When the
  // preference is "auto", candidates are tried in auto order and every skipped one
  // is logged at debug level with its reason.
  Status select(const Bucket& bucket, Transport** chosen) const;

  // The transport for one of the other collectives: the first in
  // collective_order() whose supports_collective() is OK (Note [Which transport
  // runs the other collectives]); the chosen transport and the skipped ones are
  // logged at debug level.
  Status select_collective(CollectiveOp op, const CollectiveView& view, Transport** chosen) const;
  // The candidates for a collective, in the order they are tried (exposed for tests).
  std::vector<Transport*> collective_order(CollectiveOp op, const CollectiveView& view) const;
  // From this many bytes "auto" sends a collective over several nodes of equal
  // size to "hierarchical" (Note [Which transport runs the other collectives]);
  // the bytes are the call's output (allgather), input (reducescatter), buffer
  // (broadcast), or the average a rank sends (alltoall).
  static size_t hierarchical_min_bytes(CollectiveOp op);

  // The auto order for a bucket (names), exposed for tests.
  std::vector<std::string> auto_order(const Bucket& bucket) const;

  // With preference "auto": host buckets under kSmallBucketBytes try `small`
  // first, larger ones `large` ("auto": the auto order as it is), and
  // KOLO_HIERARCHICAL_ALLREDUCE's preference. KOLO_TRANSPORT_SMALL / _LARGE at
  // init; the autotuner between cycles, on every rank at the same cycle.
  void set_first_choices(std::string small, std::string large);
  void set_prefer_hierarchical(bool prefer);
  // The name `choice` ("auto" or a transport) may take in set_first_choices:
  // an error naming `knob` and what this world offers otherwise.
  Status validate_first_choice(const char* knob, const std::string& choice) const;
  // The host transports this world offers, in the world's order.
  std::vector<std::string> host_transports() const;
  // The buckets of the small class are those under this many bytes.
  static constexpr size_t kSmallBucketBytes = 64 << 10;

 private:
  bool hierarchical_first(CollectiveOp op, const CollectiveView& view) const;
  Transport* find(const std::string& name) const;
  // The auto order for buckets on `device` of the small or the large class,
  // computed from the names (Note [Auto order]).
  std::vector<Transport*> rank_transports(DeviceKind device, bool small) const;
  // Recomputes orders_ after anything it depends on changed.
  void refresh_orders();
  const std::vector<Transport*>& order_for(const Bucket& bucket) const;
  // The collectives' order for host or device buffers, with or without
  // "hierarchical" first (Note [Which transport runs the other collectives]).
  std::vector<Transport*> rank_collective_transports(bool host, bool hierarchical) const;
  const std::vector<Transport*>& collective_order_for(CollectiveOp op,
                                                      const CollectiveView& view) const;

  std::vector<Transport*> offered_;
  std::string preference_;
  Topology topology_;
  bool prefer_hierarchical_ = false;
  std::string first_small_ = "auto";
  std::string first_large_ = "auto";
  // The auto order per [CUDA bucket][small class]: select() runs once per
  // bucket, so the order is not rebuilt from names there.
  std::vector<Transport*> orders_[2][2];
  // The collectives' order per [host][hierarchical first]: made with orders_.
  std::vector<Transport*> collective_orders_[2][2];
};

}  // namespace kolo::transport
