// The selection table: which transports serve which calls, in order of
// preference, as data. See Note [The selection table].
//
// A table is a list of rules; the first rule that matches a call gives the
// transports to try first, in its order; then every other transport the world
// offers whose capabilities cover the call, in the world's order (unless the
// rule ends in "only"). The table is printed by kolo-info, extended by
// KOLO_SELECT, edited by the older knobs (KOLO_TRANSPORT, KOLO_TRANSPORT_SMALL /
// _LARGE, KOLO_HIERARCHICAL_ALLREDUCE), and it is what the autotuner changes.
// Pure data and pure functions: the same text gives the same table on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/collective.h"
#include "common/dtype.h"
#include "common/status.h"

namespace kolo::transport {

// What a rule can match of a call.
enum class Kind : uint8_t {
  kAllreduce,      // an element-wise allreduce bucket
  kAdasum,         // an op=ADASUM bucket
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
};
constexpr int kNumKinds = 6;

// Where the world's ranks are.
enum class Span : uint8_t {
  kAny,
  kOneNode,     // "node": every rank on one node
  kNodes,       // "nodes": several nodes
  kNodesShared, // "nodes+": several nodes with at least two ranks on each
};

enum class Memory : uint8_t { kAny, kHost, kDevice };

// How a world's ranks sit, as the table's spans see them.
struct Placement {
  bool one_node = true;      // local_size == size
  bool shared_nodes = false; // several nodes, local_size >= 2
  bool within(Span span) const;
};

struct Rule {
  uint32_t kinds = 0;  // bit k for Kind k
  Memory memory = Memory::kAny;
  size_t min_bytes = 0;                                  // inclusive
  size_t max_bytes = std::numeric_limits<size_t>::max();  // exclusive
  Span span = Span::kAny;
  std::vector<std::string> transports;
  bool only = false;  // no other transport after these

  bool matches(Kind kind, DeviceKind memory, size_t bytes, const Placement& where) const;
  std::string to_string() const;
};

class SelectionTable {
 public:
  // Parses rules (Note [The selection table] gives the syntax); an error names
  // the rule and what is wrong with it. `known` are the transport names a rule
  // may use (empty: any).
  static Status parse(const std::string& text, const std::vector<std::string>& known,
                      SelectionTable* out);
  // kolo's default table (Note [Auto order] in selection.cc says why).
  static const SelectionTable& defaults();

  const std::vector<Rule>& rules() const { return rules_; }
  // The first rule for the call, or null.
  const Rule* match(Kind kind, DeviceKind memory, size_t bytes, const Placement& where) const;
  // One rule per line, in the syntax parse() reads.
  std::string to_string() const;

  // Edits (the older knobs and the autotuner):
  // `rules` go before every rule here (KOLO_SELECT, KOLO_TRANSPORT).
  void prepend(const std::vector<Rule>& rules);
  // In every host allreduce rule within [min_bytes, max_bytes) that is not
  // "only", `name` moves to the front (added if missing): KOLO_TRANSPORT_SMALL
  // and _LARGE.
  void promote(const std::string& name, size_t min_bytes, size_t max_bytes);
  // In every host allreduce rule that is not "only", `name` goes right after
  // `after` where that is listed, else first (added if missing):
  // KOLO_HIERARCHICAL_ALLREDUCE.
  void insert_after(const std::string& name, const std::string& after);

 private:
  std::vector<Rule> rules_;
};

// Note [The selection table]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// One rule per line (or separated by ';'), '#' starts a comment:
//   KINDS MEMORY SIZES SPAN : T1, T2, ... [only]
// KINDS   allreduce|adasum|allgather|broadcast|alltoall|reducescatter, joined
//         with '|', or '*' for all but adasum
// MEMORY  host | device | *
// SIZES   N-M (N <= bytes < M), N- (from N), or *; K, M, G suffixes (binary)
// SPAN    node (every rank on one node), nodes (several nodes), nodes+ (several
//         nodes, at least two ranks on each), or *
// The bytes of a call are what decides its cost: an allreduce bucket's, an
// allgather's output, a reducescatter's input, a broadcast's buffer, and what a
// rank sends on average in an alltoall. A call's candidates are the first
// matching rule's transports, then (unless "only") every other offered
// transport whose capabilities cover the call, in the world's order; the first
// whose supports() is OK runs it. Everything a rule reads is the same on every
// rank, so every rank picks the same transport.

}  // namespace kolo::transport
