// The collectives, one enum for every layer: the core negotiates all of them,
// a transport moves the data of the five that have any (allreduce, allgather,
// broadcast, alltoall, reducescatter; the grouped kinds reach a transport as
// their parts, barrier and join end in the negotiation).
//
// The values are the wire encoding of a request (core/wire.h): never renumber.
#pragma once

#include <cstdint>

namespace kolo {

enum class Collective : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kGroupedAllreduce = 7,
  kGroupedAllgather = 8,
  kGroupedReducescatter = 9,
};
constexpr int kNumCollectives = 10;

// "allreduce", "grouped allgather", ...; "invalid" out of range.
const char* collective_name(Collective c);

}  // namespace kolo
