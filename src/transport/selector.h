// Selector: the transport for each call, read from the selection table
// (selection.h) against the transports a world offers and their capabilities
// (capabilities.h).
//
// Contract: built at init from the world's transports (not owned; they outlive
// the selector) and the knobs; used by one cycle at a time. select()
// and select_collective() are pure functions of the table, the call and the
// transports' answers, all the same on every rank, so every rank picks the same
// transport. The edits (set_first_choices, set_prefer_hierarchical) happen on
// every rank at the same cycle (the autotuner's).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/capabilities.h"
#include "transport/control_plane.h"
#include "transport/selection.h"
#include "transport/transport.h"

namespace kolo::transport {

struct SelectorOptions {
  std::string preference = "auto";  // KOLO_TRANSPORT
  std::string rules;                // KOLO_SELECT
  bool prefer_hierarchical = false; // KOLO_HIERARCHICAL_ALLREDUCE
  std::string first_small = "auto"; // KOLO_TRANSPORT_SMALL
  std::string first_large = "auto"; // KOLO_TRANSPORT_LARGE
};

class Selector {
 public:
  // From this many bytes a host allreduce bucket is of the large class.
  static constexpr size_t kSmallBucketBytes = 64 << 10;

  Selector(std::vector<Transport*> offered, SelectorOptions options, Topology topology);
  // The older form (tests): KOLO_TRANSPORT and KOLO_HIERARCHICAL_ALLREDUCE only.
  Selector(std::vector<Transport*> offered, std::string preference, Topology topology,
           bool prefer_hierarchical = false);

  // The arithmetic for operations that ride with the AND (Note [Data rides with
  // the AND] in core/negotiator.h): the carrier of the offered transport that
  // carries; null where none does, and then nothing rides.
  const Carrier* carrier() const;

  // Whether the knobs can be served by this world (an init-time error naming the
  // knob otherwise). Decided when the options change; select() asks on every bucket.
  const Status& validate() const { return valid_; }

  // The transport for a bucket: the first candidate (Note [The selection table])
  // whose capabilities cover it and whose supports() is OK; the chosen one and
  // every skipped one are logged at debug level. An error names every reason.
  Status select(const Bucket& bucket, Transport** chosen) const;

  // Note [The last choice is kept]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A training step submits the same buckets step after step, and a small
  // allreduce alone spent several percent of its time choosing its transport
  // again (a blocking 8 B allreduce at 2 ranks: 0.94x MPI choosing every time,
  // 0.97x with the choice kept; docs/perf/small-ops.md, "The last choice is
  // kept"). select()'s answer depends only on the table (rebuilt by refresh())
  // and on what of the bucket the table and the transports read: its kind,
  // memory kind, dtype, count, reduction op and whether it must be
  // deterministic (supports() reads no more: transport.h). So select() keeps
  // its last success with those and answers the same bucket again from it;
  // refresh() forgets it. Errors are not kept: they are rare and their message
  // names the call. Cycles run one at a time (core/coordinator_gate.h), on
  // whichever thread holds the gate, so the kept choice needs no lock.
  Status select_collective(Collective op, const CollectiveView& view, Transport** chosen) const;

  // The candidates in the order they are tried (tests, and the logs).
  std::vector<std::string> auto_order(const Bucket& bucket) const;
  std::vector<Transport*> collective_order(Collective op, const CollectiveView& view) const;

  // The edits of the autotuner (and of the knobs at init): "auto" or a host
  // transport this world offers.
  void set_first_choices(std::string small, std::string large);
  void set_prefer_hierarchical(bool prefer);
  Status validate_first_choice(const char* knob, const std::string& choice) const;
  // The transports that take host allreduce buckets, in the world's order.
  std::vector<std::string> host_transports() const;
  // Whether KOLO_HIERARCHICAL_ALLREDUCE can change a choice here: the world
  // offers the hierarchical transport (the autotuner's space).
  bool can_prefer_hierarchical() const { return find("hierarchical") != nullptr; }

  // The table in effect: the defaults with every knob's edits.
  const SelectionTable& table() const { return table_; }
  // The table `options` make (kolo-info, before any world exists); `device`:
  // the preferred transport takes device memory. Fails as validate() on a
  // KOLO_SELECT that does not parse.
  static Status table_for(const SelectorOptions& options, bool device, SelectionTable* out);

  // The bytes the table compares for a collective (Note [The selection table]).
  static size_t call_bytes(Collective op, const CollectiveView& view, int world_size);

 private:
  struct Compiled {
    const Rule* rule;
    std::vector<Transport*> order[kNumKinds];
  };

  Transport* find(const std::string& name) const;
  const Capabilities& caps(const Transport* t) const;
  bool serves(const Transport* t, Kind kind) const;
  // Rebuilds table_ from the options, then compiled_.
  void refresh();
  Status check_options() const;  // what validate() answers
  std::vector<Transport*> candidates(const Rule* rule, Kind kind) const;
  const std::vector<Transport*>& order_for(Kind kind, DeviceKind memory, size_t bytes) const;
  // `deterministic`: only transports that reduce in rank order (Note
  // [Deterministic reductions] in transport.h). `what` names the call for the
  // debug log and the error; it is only asked for there, since building it costs
  // a small call a fair part of its time (docs/perf/small-ops.md).
  Status pick(const std::vector<Transport*>& order, Kind kind, DeviceKind memory, DataType dtype,
              size_t bytes, bool deterministic, const std::function<std::string()>& what,
              const std::function<Status(Transport*)>& supports, Transport** chosen) const;

  std::vector<Transport*> offered_;
  std::vector<Capabilities> caps_;  // offered_'s, in its order
  SelectorOptions options_;
  Topology topology_;
  Placement placement_;
  SelectionTable table_;
  Status rules_status_;                // KOLO_SELECT's parse
  Status valid_;                       // validate()'s answer for options_
  std::vector<Compiled> compiled_;     // the rules this world's placement can match
  std::vector<Transport*> fallback_[kNumKinds];  // no rule matched
  // Note [The last choice is kept]: select()'s last success and what it read.
  struct LastChoice {
    Transport* chosen = nullptr;  // null: none kept
    ReduceOp op = ReduceOp::kSum;
    DeviceKind memory = DeviceKind::kCpu;
    DataType dtype = DataType::kFloat32;
    int64_t count = 0;
    bool deterministic = false;
  };
  mutable LastChoice last_;
};

}  // namespace kolo::transport
